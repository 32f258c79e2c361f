-- The tenant's active item (pending or claimed) of kind $1 holding active
-- key $2 (under the tenant set for the transaction).
SELECT * FROM items
WHERE kind = $1 AND active_key = $2 AND status IN ('pending', 'claimed')
LIMIT 1
