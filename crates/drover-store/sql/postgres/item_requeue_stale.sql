-- One tenant's lease-expired claims, at most $1: each a failed attempt
-- ('lease expired'), requeued after the policy's nominal delay
-- least(cap $2, base $3 * factor $4 ^ attempts-before) (RetryPolicy::nominal_delay;
-- $5 caps the exponent so power() cannot overflow), or dead-lettered with an
-- audit entry when the budget is spent. Each lane with a requeued item
-- available at once (a zero delay) is woken once, in the same statement,
-- delivered at commit. Runs as the runtime role for the tenant.
WITH stale AS (
    SELECT id
    FROM items
    WHERE status = 'claimed' AND lease_expires_at <= now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE items
    SET attempts = items.attempts + 1,
        status = CASE WHEN items.attempts + 1 >= items.max_attempts THEN 'failed' ELSE 'pending' END,
        available_at = CASE WHEN items.attempts + 1 >= items.max_attempts THEN items.available_at
            ELSE now() + make_interval(secs => least($2::float8,
                $3::float8 * power($4::float8, least(items.attempts, $5::int4)::float8)))
            END,
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        last_error = 'lease expired',
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    FROM stale
    WHERE items.id = stale.id AND items.status = 'claimed' AND items.lease_expires_at <= now()
    RETURNING items.id, items.tenant_id, items.lane, items.status, items.available_at
), audited AS (
    INSERT INTO audit (tenant_id, item_id, action, actor, detail)
    SELECT tenant_id, id, 'dead_letter', '00000000-0000-0000-0000-000000000000'::uuid, 'lease expired' FROM upd WHERE status = 'failed'
), woke AS (
    SELECT DISTINCT lane FROM upd WHERE status = 'pending' AND available_at <= now()
)
SELECT count(*) FILTER (WHERE status = 'pending') AS requeued,
       count(*) FILTER (WHERE status = 'failed') AS dead_lettered,
       (SELECT count(pg_notify('drover_wake', current_schema() || ':' || lane || '#' || txid_current())) FROM woke) AS woken
FROM upd
