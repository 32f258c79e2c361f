-- Before a purge batch (?1, the JSON array of rowids of
-- item_purge_pick.sql) is deleted, in its transaction: each of its
-- items' open-dependency count (migration 0039).
DELETE FROM item_waits
WHERE item_id IN (SELECT id FROM items WHERE rowid IN (SELECT value FROM json_each(?1)))
