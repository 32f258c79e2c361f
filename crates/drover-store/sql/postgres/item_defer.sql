-- Pending again after $3 seconds, no attempt spent. Fenced. A deferral that
-- is available at once (a zero delay) wakes the lane's workers in the same
-- statement, delivered at commit.
WITH upd AS (
    UPDATE items
    SET status = 'pending', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        available_at = now() + make_interval(secs => $3::float8),
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
    RETURNING available_at, lane
)
SELECT upd.available_at, upd.lane,
       -- The notification is counted from a subquery of its own: an aggregate of
       -- only outer columns would belong to the outer query.
       (SELECT count(n.sent) FROM (SELECT pg_notify('drover_wake', current_schema() || ':' || upd.lane || '#' || txid_current()) AS sent
                                     WHERE upd.available_at <= now()) AS n) AS woken
FROM upd
