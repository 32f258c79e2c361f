-- One record of a tenant by its start key. ?1 tenant, ?2 key.
SELECT * FROM orchestrations WHERE tenant_id = ?1 AND idempotency_key = ?2
