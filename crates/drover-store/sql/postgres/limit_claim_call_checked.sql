-- The one-call limited claim (limit_claim_call.sql) with the flow
-- settings' generation checked in the same statement, as
-- item_claim_checked.sql does: $15 the generation the caller read.
SELECT g.gen AS flow_gen, c.*
FROM "{schema}".flow_generation g
LEFT JOIN LATERAL (
    SELECT id, tenant_id, kind, lane, group_key, payload, priority, status, available_at,
           attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
           last_error, idempotency_key, created_by, request_id, traceparent, created_at,
           updated_at, updated_by, progress, result, active_key
    FROM "{schema}".claim_limited($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
    WHERE g.gen = $15
    OFFSET 0
) c ON true
