-- Claim with the flow settings' generation checked in the same statement:
-- $6 is the generation the caller's rates and closures were read at. The
-- generation's row (migration 0046) is read on the statement's snapshot;
-- only when it still equals $6 is claim_items called (the subquery's
-- filter on the outer row is a one-time gate, and OFFSET 0 keeps the
-- subquery from being merged into the join, where the function would run
-- before the filter). So the answer is one row per claimed item, or one
-- row with no item (nothing to claim, or the generation moved: `flow_gen`
-- says which). Columns named, as item_claim.sql says why.
SELECT g.gen AS flow_gen, c.*
FROM "{schema}".flow_generation g
LEFT JOIN LATERAL (
    SELECT id, tenant_id, kind, lane, group_key, payload, priority, status, available_at,
           attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
           last_error, idempotency_key, created_by, request_id, traceparent, created_at,
           updated_at, updated_by, progress, result, active_key
    FROM "{schema}".claim_items($1, $2, $3, $4, $5)
    WHERE g.gen = $6
    OFFSET 0
) c ON true
