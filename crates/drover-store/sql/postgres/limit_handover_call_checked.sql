-- The handover of limit_handover_call.sql behind the flow settings'
-- generation (migration 0046), as item_claim_checked.sql gates a claim:
-- $19 the generation the caller read its rates and closures at. When it
-- moved, complete_then_claim is not called at all (neither the completion
-- nor the claim runs): one row with `flow_gen` and nothing else, and the
-- caller completes and claims apart, each checked on its own.
SELECT g.gen AS flow_gen, h.*
FROM "{schema}".flow_generation g
LEFT JOIN LATERAL (
    SELECT r.landed,
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
    FROM "{schema}".complete_then_claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                                        $15, $16, $17, $18) AS r
    WHERE g.gen = $19
    OFFSET 0
) h ON true
