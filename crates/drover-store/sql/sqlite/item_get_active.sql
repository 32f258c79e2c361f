-- The tenant's active item (pending or claimed) of a kind holding an active
-- key: the row a unique-while-active insert collided with.
-- ?1 tenant_id, ?2 kind, ?3 active_key.
SELECT * FROM items
WHERE tenant_id = ?1 AND kind = ?2 AND active_key = ?3 AND status IN ('pending', 'claimed')
