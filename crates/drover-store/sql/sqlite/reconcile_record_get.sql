-- One record. ?1 tenant, ?2 reconciler, ?3 key.
SELECT * FROM sync_records WHERE tenant_id = ?1 AND reconciler = ?2 AND key = ?3
