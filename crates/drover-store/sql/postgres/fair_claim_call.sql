-- The fair claim in one call into fair_claim_call (migration 0057, run as
-- the system role): $1 lane, $2 kinds, $3 worker, $4 lease seconds, $5
-- limit, $6 the version token the caller's passes were kept at, $7 the
-- token to write, $8 the flow settings' generation (NULL: not read), then
-- the round the caller drew: $9 tenants, $10 their passes, $11 strides,
-- $12 caps. One row per claimed item; none when nothing was claimed; one
-- row with outcome 'moved' or 'stale' and no item. {schema} is the
-- validated schema name. Columns named, as item_claim.sql says why.
SELECT r.outcome,
       (r.claimed).id AS id, (r.claimed).tenant_id AS tenant_id, (r.claimed).kind AS kind,
       (r.claimed).lane AS lane, (r.claimed).group_key AS group_key,
       (r.claimed).payload AS payload, (r.claimed).priority AS priority,
       (r.claimed).status AS status, (r.claimed).available_at AS available_at,
       (r.claimed).attempts AS attempts, (r.claimed).max_attempts AS max_attempts,
       (r.claimed).claimed_by AS claimed_by, (r.claimed).claim_token AS claim_token,
       (r.claimed).claim_seq AS claim_seq, (r.claimed).lease_expires_at AS lease_expires_at,
       (r.claimed).last_error AS last_error, (r.claimed).idempotency_key AS idempotency_key,
       (r.claimed).created_by AS created_by, (r.claimed).request_id AS request_id,
       (r.claimed).traceparent AS traceparent, (r.claimed).created_at AS created_at,
       (r.claimed).updated_at AS updated_at, (r.claimed).updated_by AS updated_by,
       (r.claimed).progress AS progress, (r.claimed).result AS result,
       (r.claimed).active_key AS active_key
FROM "{schema}".fair_claim_call($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS r
