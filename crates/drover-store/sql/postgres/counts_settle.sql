-- Folds the final rows updated in [$1, $2) into item_counts and moves the
-- mark to $2 (system role; after counts_settle_begin.sql, in its
-- transaction). The retry lines this snapshot sees are consumed: a line
-- for a row updated before $1 was counted by an earlier settlement, so it
-- is subtracted; any other line's row was already out of its final status
-- when this snapshot (or an earlier one) looked, so it was never counted
-- and the line is dropped.
WITH counted AS (
    -- One range of items_final per status (see counts.sql).
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM items
    WHERE status = 'done' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status
    UNION ALL
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM items
    WHERE status = 'failed' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status
    UNION ALL
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM items
    WHERE status = 'cancelled' AND updated_at >= $1::timestamptz AND updated_at < $2::timestamptz
    GROUP BY tenant_id, lane, kind, status
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
       (SELECT count(*) FROM moved) AS moved
