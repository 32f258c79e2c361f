-- The checkpoint of one reconciler and tenant. ?1 tenant, ?2 reconciler.
SELECT * FROM sync_checkpoints WHERE tenant_id = ?1 AND reconciler = ?2
