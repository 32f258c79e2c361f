-- Moves the tenant's head past the events just appended, under the writer's
-- lock.
INSERT INTO event_heads (tenant_id, head, head_at) VALUES (?1, ?2, ?3)
ON CONFLICT (tenant_id) DO UPDATE SET head = excluded.head, head_at = excluded.head_at
