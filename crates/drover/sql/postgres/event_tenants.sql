-- System role: the tenants whose log holds an event (the projector
-- runner's discovery).
SELECT tenant_id FROM event_heads WHERE head > 0 ORDER BY tenant_id LIMIT $1
