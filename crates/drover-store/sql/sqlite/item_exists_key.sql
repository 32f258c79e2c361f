-- The id of the tenant's item with this idempotency key, if any: a bulk
-- insert's collision check. ?1 tenant_id, ?2 key.
SELECT id FROM items WHERE tenant_id = ?1 AND idempotency_key = ?2
