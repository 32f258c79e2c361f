-- Moves the tenant's head past the events just appended (the row is locked
-- by event_head_lock.sql in this transaction).
UPDATE event_heads SET head = $2, head_at = now() WHERE tenant_id = $1
