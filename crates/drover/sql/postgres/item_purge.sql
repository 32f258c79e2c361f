-- One bounded batch of final items last updated before $1, at most $2.
-- System role. SKIP LOCKED: a concurrent purge takes other rows. Only rows
-- the count rollup has settled are taken (updated before its mark), and
-- they leave it in the same statement; a row not settled yet waits for the
-- next pass.
WITH gone AS (
    DELETE FROM items
    WHERE id IN (
        SELECT id
        FROM items
        WHERE status IN ('done', 'failed', 'cancelled') AND updated_at < $1
          AND updated_at < (SELECT settled_to FROM item_counts_mark
                            WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid)
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    RETURNING tenant_id, lane, kind, status
), per AS (
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM gone
    GROUP BY tenant_id, lane, kind, status
), subtracted AS (
    UPDATE item_counts AS c
    SET n = c.n - per.n
    FROM per
    WHERE c.tenant_id = per.tenant_id AND c.lane = per.lane AND c.kind = per.kind
      AND c.status = per.status
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS purged, (SELECT count(*) FROM subtracted) AS groups
