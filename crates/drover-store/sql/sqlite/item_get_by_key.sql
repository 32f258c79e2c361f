-- One item of a tenant by idempotency key.
SELECT * FROM items WHERE tenant_id = ?1 AND idempotency_key = ?2
