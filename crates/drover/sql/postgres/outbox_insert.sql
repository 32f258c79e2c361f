-- One outbox row (its child is the ring's current one: the column default).
-- An id already there changes nothing.
INSERT INTO outbox (id, tenant_id, kind, payload, actor, request_id, traceparent, created_at)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8)
ON CONFLICT DO NOTHING
