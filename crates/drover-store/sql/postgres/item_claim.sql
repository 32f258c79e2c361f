-- Claim: one round trip into claim_items (migration 0002 holds the
-- statement, run as the system role). {schema} is the validated schema name.
-- The columns are named, not `*`: a migration that adds a column to items
-- (0032's group_key, 0034's seq) changes the function's row type, and a
-- statement this connection prepared before it would fail with "cached
-- plan must not change result type" until the connection closed; with the
-- columns named, its result is the same and it is only planned again.
SELECT id, tenant_id, kind, lane, group_key, payload, priority, status, available_at,
       attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
       last_error, idempotency_key, created_by, request_id, traceparent, created_at,
       updated_at, updated_by, progress, result, active_key
FROM "{schema}".claim_items($1, $2, $3, $4, $5)
