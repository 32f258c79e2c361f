-- The position of the tenant's event with this id, if its log holds one.
SELECT position FROM events WHERE tenant_id = ?1 AND id = ?2
