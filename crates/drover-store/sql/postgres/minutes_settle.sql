-- Folds the done and failed rows updated in [$1, $2) into item_minutes,
-- per minute, tenant, lane and kind, and deletes minutes older than $3
-- (system role; in the settlement's transaction, after counts_settle.sql,
-- over the same range of items_final: one branch per status, as there).
-- A range older than $3 is not folded: the first settlement of an old
-- table reads only the rows the rollup keeps. Latency is available_at to
-- updated_at of the done rows, in milliseconds.
WITH fresh AS (
    SELECT tenant_id, lane, kind, date_trunc('minute', updated_at) AS minute,
           count(*) AS done, 0::bigint AS failed,
           coalesce(sum(greatest(extract(epoch FROM updated_at - available_at) * 1000, 0)), 0)::bigint AS ms_sum,
           coalesce(max(greatest(extract(epoch FROM updated_at - available_at) * 1000, 0)), 0)::bigint AS ms_max
    FROM items
    WHERE status = 'done'
      AND updated_at >= greatest($1::timestamptz, $3::timestamptz) AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, date_trunc('minute', updated_at)
    UNION ALL
    SELECT tenant_id, lane, kind, date_trunc('minute', updated_at) AS minute,
           0::bigint, count(*), 0::bigint, 0::bigint
    FROM items
    WHERE status = 'failed'
      AND updated_at >= greatest($1::timestamptz, $3::timestamptz) AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, date_trunc('minute', updated_at)
), folded AS (
    INSERT INTO item_minutes AS m (minute, tenant_id, lane, kind, done, failed, latency_ms_sum, latency_ms_max)
    SELECT minute, tenant_id, lane, kind, sum(done)::bigint, sum(failed)::bigint,
           sum(ms_sum)::bigint, max(ms_max)::bigint
    FROM fresh
    GROUP BY minute, tenant_id, lane, kind
    ON CONFLICT (minute, tenant_id, lane, kind) DO UPDATE
    SET done = m.done + excluded.done,
        failed = m.failed + excluded.failed,
        latency_ms_sum = m.latency_ms_sum + excluded.latency_ms_sum,
        latency_ms_max = greatest(m.latency_ms_max, excluded.latency_ms_max)
    RETURNING 1
), expired AS (
    DELETE FROM item_minutes WHERE minute < $3::timestamptz
    RETURNING 1
)
SELECT (SELECT count(*) FROM folded) AS folded, (SELECT count(*) FROM expired) AS expired
