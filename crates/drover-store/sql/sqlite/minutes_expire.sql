-- Deletes the minutes older than ?1 (µs) from item_minutes (a range of its
-- primary key; in the settlement's transaction).
DELETE FROM item_minutes WHERE minute < ?1
