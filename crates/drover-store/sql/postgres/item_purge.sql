-- One bounded batch of final items last updated before $1, at most $2,
-- from {table} (store/postgres/rotate.rs fills it in): the default
-- partition by name (ids outside every child's window, migration 0026), or
-- items within one child's window of ids [$3, $4) ({window} then prunes to
-- it: the fallback for a child past the retention that still holds more
-- rows than its drop may move); the children go whole (item_child_*.sql).
-- System role. SKIP LOCKED: a concurrent purge takes other rows. The rows
-- the count rollup had settled (updated before its mark) leave it in the
-- same statement, and their keys leave item_keys, and their own link rows
-- (migration 0039) leave with them: the edges whose dependant they are,
-- their open-dependency count, their batch membership. An edge whose
-- dependency they are stays while its dependant is stored (it belongs to
-- the dependant; a `wait` dependant still names a purged dead letter).
-- The batches go in batches_purge.sql. The mark is read FOR
-- SHARE, so a settlement in flight is waited for and its mark used (the
-- rows it counted are subtracted), and the next one starts only after this
-- commit, when the rows are gone.
WITH mark AS (
    SELECT settled_to FROM item_counts_mark
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
    FOR SHARE
), gone AS (
    DELETE FROM {table}
    WHERE {window}id IN (
        SELECT id
        FROM {table}
        WHERE {window}status IN ('done', 'failed', 'cancelled') AND updated_at < $1
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, tenant_id, lane, kind, status, updated_at, idempotency_key, active_key
), active_keys AS (
    -- A purged item's active key (migration 0038), if it still names it.
    DELETE FROM item_active_keys AS a
    USING gone
    WHERE gone.active_key IS NOT NULL AND a.tenant_id = gone.tenant_id
      AND a.kind = gone.kind AND a.active_key = gone.active_key AND a.item_id = gone.id
    RETURNING 1
), keys AS (
    DELETE FROM item_keys AS k
    USING gone
    WHERE gone.idempotency_key IS NOT NULL AND k.tenant_id = gone.tenant_id
      AND k.idempotency_key = gone.idempotency_key AND k.item_id = gone.id
    RETURNING 1
), edges AS (
    DELETE FROM item_deps AS e USING gone WHERE e.item_id = gone.id
    RETURNING 1
), waits AS (
    DELETE FROM item_waits AS w USING gone WHERE w.item_id = gone.id
    RETURNING 1
), members AS (
    DELETE FROM batch_members AS m USING gone WHERE m.item_id = gone.id
    RETURNING 1
), per AS (
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM gone
    WHERE updated_at < (SELECT settled_to FROM mark)
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
