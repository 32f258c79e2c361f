-- Folds the final rows updated in [$1, $2) into item_counts, the done and
-- failed ones into item_minutes (dropping minutes before $3), and moves the
-- mark to $2 (system role; after counts_settle_begin.sql, in its
-- transaction). The retry lines this snapshot sees are consumed: a line
-- for a row updated before $1 was counted by an earlier settlement, so it
-- is subtracted; any other line's row was already out of its final status
-- when this snapshot (or an earlier one) looked, so it was never counted
-- and the line is dropped.
WITH fine AS (
    -- One range of items_final per status (see counts.sql), read once for
    -- both rollups: per minute too, with the done rows' available-to-done
    -- in milliseconds, for item_minutes (migration 0041).
    SELECT tenant_id, lane, kind, status, date_trunc('minute', updated_at) AS minute,
           count(*) AS n,
           coalesce(sum(greatest(extract(epoch FROM updated_at - available_at) * 1000, 0)), 0)::bigint AS ms_sum,
           coalesce(max(greatest(extract(epoch FROM updated_at - available_at) * 1000, 0)), 0)::bigint AS ms_max
    FROM items
    WHERE status = 'done' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status, date_trunc('minute', updated_at)
    UNION ALL
    SELECT tenant_id, lane, kind, status, date_trunc('minute', updated_at), count(*), 0, 0
    FROM items
    WHERE status = 'failed' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status, date_trunc('minute', updated_at)
    UNION ALL
    SELECT tenant_id, lane, kind, status, date_trunc('minute', updated_at), count(*), 0, 0
    FROM items
    WHERE status = 'cancelled' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status, date_trunc('minute', updated_at)
), counted AS (
    SELECT tenant_id, lane, kind, status, sum(n)::bigint AS n
    FROM fine
    GROUP BY tenant_id, lane, kind, status
), minutes AS (
    -- Minutes older than $3 are not kept (the first settlement of an old
    -- table folds all of it into item_counts, and only the recent minutes
    -- here).
    INSERT INTO item_minutes AS m (minute, tenant_id, lane, kind, done, failed, latency_ms_sum, latency_ms_max)
    SELECT minute, tenant_id, lane, kind,
           coalesce(sum(n) FILTER (WHERE status = 'done'), 0)::bigint,
           coalesce(sum(n) FILTER (WHERE status = 'failed'), 0)::bigint,
           sum(ms_sum)::bigint, max(ms_max)::bigint
    FROM fine
    WHERE status IN ('done', 'failed') AND minute >= $3::timestamptz
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
), seen AS (
    DELETE FROM item_counts_unfinal
    RETURNING tenant_id, lane, kind, status, was_updated_at
), unfinal AS (
    SELECT tenant_id, lane, kind, status, -count(*) AS n
    FROM seen
    WHERE was_updated_at < $1::timestamptz
    GROUP BY tenant_id, lane, kind, status
), delta AS (
    SELECT tenant_id, lane, kind, status, sum(n)::bigint AS n
    FROM (SELECT * FROM counted UNION ALL SELECT * FROM unfinal) AS d
    GROUP BY tenant_id, lane, kind, status
), folded AS (
    INSERT INTO item_counts AS c (tenant_id, lane, kind, status, n)
    SELECT tenant_id, lane, kind, status, n FROM delta WHERE n <> 0
    ON CONFLICT (tenant_id, lane, kind, status) DO UPDATE SET n = c.n + excluded.n
    RETURNING 1
), moved AS (
    UPDATE item_counts_mark SET settled_to = $2::timestamptz
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
    RETURNING 1
)
SELECT (SELECT coalesce(sum(n), 0) FROM counted)::bigint AS settled,
       (SELECT count(*) FROM seen) AS unfinal,
       (SELECT count(*) FROM folded) AS groups,
       (SELECT count(*) FROM moved) AS moved,
       (SELECT count(*) FROM minutes) AS minutes,
       (SELECT count(*) FROM expired) AS expired
