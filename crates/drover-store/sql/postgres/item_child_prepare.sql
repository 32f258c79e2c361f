-- The items children from now to $1 ahead, $2 wide each, made as plain
-- tables shaped like items, not yet attached (system role; migration
-- 0052). Takes no lock a claim waits on. One row per window: the table's
-- name and its id range, for item_child_attach.sql.
SELECT name, lo, hi FROM items_child_prepare(now(), now() + $1::interval, $2::interval)
