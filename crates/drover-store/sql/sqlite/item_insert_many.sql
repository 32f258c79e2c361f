-- Many items in one statement, never overwriting. The rows placeholder is
-- replaced by item_insert_row.sql once per item, comma separated; the
-- returning placeholder by nothing (the fast path: every row landed when
-- the count matches) or by item_insert_many_returning.sql (the path that
-- tells which inputs collided).
INSERT INTO items (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
    last_error, idempotency_key, created_by, request_id, traceparent,
    created_at, updated_at, updated_by, group_key, active_key
) VALUES
{rows}
ON CONFLICT DO NOTHING
{returning}
