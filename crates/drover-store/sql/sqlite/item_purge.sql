-- Deletes one purge batch (?1, a JSON array of rowids from
-- item_purge_pick.sql; system operation).
DELETE FROM items WHERE rowid IN (SELECT value FROM json_each(?1))
