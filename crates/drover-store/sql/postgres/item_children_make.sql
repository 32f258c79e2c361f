-- The items children from now to $1 ahead, $2 wide each (system role; the
-- function of migration 0026). Under item_lock_timeout.sql: making a child
-- locks items exclusively for an instant.
SELECT items_children_make(now(), now() + $1::interval, $2::interval) AS made
