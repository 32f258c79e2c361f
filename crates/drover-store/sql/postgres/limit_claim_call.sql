-- The limited claim in one round trip into claim_limited (migration 0036,
-- run as the system role): $1 lane, $2 kinds, $3 worker, $4 lease seconds,
-- $5 at most this many, $6 candidates to read, $7 the scope-lock prefix,
-- $8 the lane's limit, $9/$10 kind limits, $11/$12 per-group limits, $13
-- the ordered kinds, $14 those that hold on a dead letter. {schema} is the
-- validated schema name. Columns named, as item_claim.sql says why.
SELECT id, tenant_id, kind, lane, group_key, payload, priority, status, available_at,
       attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
       last_error, idempotency_key, created_by, request_id, traceparent, created_at,
       updated_at, updated_by, progress, result, active_key
FROM "{schema}".claim_limited($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
