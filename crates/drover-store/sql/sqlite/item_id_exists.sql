-- Whether any tenant holds an item with this id (a collision check; the row
-- itself is never returned across tenants).
SELECT EXISTS (SELECT 1 FROM items WHERE id = ?1)
