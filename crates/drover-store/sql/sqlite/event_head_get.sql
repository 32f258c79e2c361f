-- The tenant's newest position and when it was appended (none: empty log).
SELECT head, head_at FROM event_heads WHERE tenant_id = ?1
