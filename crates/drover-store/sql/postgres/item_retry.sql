-- Operator retry of a final item: pending now with a fresh budget (the last
-- error is kept for the record), audited with actor $2, who also signs
-- updated_by (an operator's write, not the system's). Wakes the lane's
-- workers in the same statement, delivered at commit. The row leaves its
-- final status, so a line for the count rollup records what it was
-- (migration 0020; the next settlement consumes it).
WITH prior AS (
    SELECT id, status, updated_at
    FROM items
    WHERE id = $1 AND status IN ('done', 'failed', 'cancelled')
    FOR UPDATE
), upd AS (
    UPDATE items
    SET status = 'pending', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        attempts = 0,
        available_at = now(),
        -- A run again from scratch: the old result goes, and the item gives
        -- up its active key (an operator's retry is not an enqueue that key
        -- could refuse).
        result = NULL, active_key = NULL,
        updated_at = now(), updated_by = $2
    FROM prior
    WHERE items.id = prior.id AND items.status IN ('done', 'failed', 'cancelled')
    RETURNING items.*, prior.status AS prior_status, prior.updated_at AS prior_updated_at
), unfinal AS (
    INSERT INTO item_counts_unfinal (tenant_id, lane, kind, status, was_updated_at)
    SELECT tenant_id, lane, kind, prior_status, prior_updated_at FROM upd
), audited AS (
    INSERT INTO audit (tenant_id, item_id, action, actor, detail)
    SELECT tenant_id, id, 'retry', $2, NULL FROM upd
)
SELECT upd.*,
       -- The notification is counted from a subquery of its own: an aggregate of
       -- only outer columns would belong to the outer query.
       (SELECT count(n.sent) FROM (SELECT pg_notify('drover_wake', current_schema() || ':' || upd.lane || '#' || txid_current()) AS sent) AS n) AS woken
FROM upd
