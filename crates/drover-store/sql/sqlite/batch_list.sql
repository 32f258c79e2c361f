SELECT * FROM batches WHERE tenant_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2
