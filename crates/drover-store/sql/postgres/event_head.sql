-- The newest position of the tenant's log and when it was appended.
SELECT head, head_at FROM event_heads WHERE tenant_id = $1
