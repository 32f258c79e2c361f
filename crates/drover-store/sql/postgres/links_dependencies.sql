-- The rows of the items one item waits (or waited) for, with their
-- results: what a dependant reads of the work it followed (runtime role,
-- the item's tenant). One statement however many there are.
SELECT i.* FROM items i
WHERE i.id IN (SELECT dep_id FROM item_deps WHERE item_id = $1)
ORDER BY i.id
