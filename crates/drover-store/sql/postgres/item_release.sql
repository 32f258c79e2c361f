-- Pending again now, no attempt spent; $3 (when given) kept as last_error.
-- Fenced. Wakes the lane's workers in the same statement: the NOTIFY is
-- delivered at commit (never for a rolled-back release), and PostgreSQL
-- folds identical notifications of one transaction into one.
WITH upd AS (
    UPDATE items
    SET status = 'pending', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        available_at = now(),
        last_error = coalesce($3, last_error),
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
    RETURNING lane
)
SELECT upd.lane,
       -- The notification is counted from a subquery of its own: an aggregate of
       -- only outer columns would belong to the outer query.
       (SELECT count(n.sent) FROM (SELECT pg_notify('drover_wake', current_schema() || ':' || upd.lane || '#' || txid_current()) AS sent) AS n) AS woken
FROM upd
