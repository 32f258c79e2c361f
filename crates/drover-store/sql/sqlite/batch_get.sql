SELECT * FROM batches WHERE tenant_id = ?1 AND id = ?2
