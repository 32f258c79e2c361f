-- Attaches one prepared child (system role; migration 0052): SHARE UPDATE
-- EXCLUSIVE on items, so claims go on; under item_lock_timeout.sql for the
-- default partition's brief exclusive lock. False when the default
-- partition holds a row of the window (the table is dropped).
SELECT items_child_attach($1, $2, $3) AS attached
