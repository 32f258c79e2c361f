-- A failure, fenced: one attempt spent; requeued after $4 seconds, or
-- dead-lettered (with its audit entry, in the same statement) when the budget
-- is spent (rules::is_exhausted: attempts + 1 >= max_attempts) or $5 (fatal).
-- A requeue available at once (a zero delay) wakes the lane's workers in the
-- same statement, delivered at commit.
WITH upd AS (
    UPDATE items
    SET attempts = attempts + 1,
        status = CASE WHEN $5 OR attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
        available_at = CASE WHEN $5 OR attempts + 1 >= max_attempts THEN available_at
                            ELSE now() + make_interval(secs => $4::float8) END,
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        last_error = $3,
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
    RETURNING id, tenant_id, lane, status, available_at, last_error
), audited AS (
    INSERT INTO audit (tenant_id, item_id, action, actor, detail)
    SELECT tenant_id, id, 'dead_letter', '00000000-0000-0000-0000-000000000000'::uuid, last_error FROM upd WHERE status = 'failed'
)
SELECT upd.status, upd.available_at, upd.lane,
       -- The notification is counted from a subquery of its own: an aggregate of
       -- only outer columns would belong to the outer query.
       (SELECT count(n.sent) FROM (SELECT pg_notify('drover_wake', current_schema() || ':' || upd.lane || '#' || txid_current()) AS sent
                                     WHERE upd.status = 'pending' AND upd.available_at <= now()) AS n) AS woken
FROM upd
