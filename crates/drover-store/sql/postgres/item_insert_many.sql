-- Many items of one tenant ($1) in one statement, never overwriting. Returns
-- the ids that were inserted; the caller resolves the others.
INSERT INTO items (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claim_seq, idempotency_key, created_by,
    request_id, traceparent, created_at, updated_at, updated_by, group_key, active_key
)
SELECT u.id, $1, u.kind, u.lane, u.payload::jsonb, u.priority, 'pending', coalesce(u.available_at, now()),
       0, u.max_attempts, 0, u.idempotency_key, u.created_by,
       u.request_id, u.traceparent, u.created_at, now(), u.created_by, u.group_key, u.active_key
FROM unnest(
    $2::uuid[], $3::text[], $4::text[], $5::text[], $6::int2[], $7::timestamptz[],
    $8::int4[], $9::text[], $10::uuid[], $11::text[], $12::text[], $13::timestamptz[],
    $14::text[], $15::text[]
) AS u(id, kind, lane, payload, priority, available_at,
       max_attempts, idempotency_key, created_by, request_id, traceparent, created_at,
       group_key, active_key)
ON CONFLICT DO NOTHING
RETURNING id
