-- Before a purge batch (?1, the JSON array of rowids of
-- item_purge_pick.sql) is deleted, in its transaction: the edges whose
-- dependant is one of its items (migration 0039). An edge whose
-- dependency it is stays while its dependant is stored: it belongs to
-- the dependant (a `wait` dependant still names a purged dead letter).
DELETE FROM item_deps
WHERE item_id IN (SELECT id FROM items WHERE rowid IN (SELECT value FROM json_each(?1)))
