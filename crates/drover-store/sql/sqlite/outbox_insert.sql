-- One outbox row; ?9 is now (the store's clock). An id already there
-- changes nothing.
INSERT INTO outbox (id, tenant_id, kind, payload, actor, request_id, traceparent, created_at,
                    status, attempts, available_at, lane, priority, max_attempts, group_key)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', 0, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT DO NOTHING
