-- The claims holding slots: every claimed item's scope parts (the claimed
-- set is small: items_claimed_lease).
SELECT lane, kind, tenant_id, group_key FROM items WHERE status = 'claimed'
