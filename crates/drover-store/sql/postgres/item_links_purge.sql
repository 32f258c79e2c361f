-- At most $3 rows of each link table (migration 0039) whose item, an id
-- in [$1, $2), is gone (its child was dropped), deleted (system role): an
-- edge whose dependant is gone, an open-dependency count, a batch
-- membership. The child's survivors were carried to the default partition,
-- so the NOT EXISTS keeps theirs. Returns the most any one table lost, so
-- the caller goes on while a batch came back full.
WITH edges AS (
    DELETE FROM item_deps
    WHERE (dep_id, item_id) IN (
        SELECT e.dep_id, e.item_id FROM item_deps e
        WHERE e.item_id >= $1 AND e.item_id < $2
          AND NOT EXISTS (SELECT 1 FROM items i WHERE i.id = e.item_id)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
), waits AS (
    DELETE FROM item_waits
    WHERE item_id IN (
        SELECT w.item_id FROM item_waits w
        WHERE w.item_id >= $1 AND w.item_id < $2
          AND NOT EXISTS (SELECT 1 FROM items i WHERE i.id = w.item_id)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
), members AS (
    DELETE FROM batch_members
    WHERE item_id IN (
        SELECT m.item_id FROM batch_members m
        WHERE m.item_id >= $1 AND m.item_id < $2
          AND NOT EXISTS (SELECT 1 FROM items i WHERE i.id = m.item_id)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
)
SELECT greatest((SELECT count(*) FROM edges), (SELECT count(*) FROM waits),
                (SELECT count(*) FROM members)) AS n
