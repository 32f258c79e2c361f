-- One item of a tenant by id.
SELECT * FROM items WHERE tenant_id = ?1 AND id = ?2
