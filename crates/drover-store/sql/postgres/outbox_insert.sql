-- One outbox row (its child is the ring's current one: the column default).
-- An id already there changes nothing: in this child by the primary key
-- (ON CONFLICT), in any other child of the ring by the outbox_id_once
-- trigger (migration 0030).
INSERT INTO outbox (id, tenant_id, kind, payload, actor, request_id, traceparent, created_at,
                    lane, priority, max_attempts, group_key)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT DO NOTHING
