RETURNING id, tenant_id, idempotency_key, active_key
