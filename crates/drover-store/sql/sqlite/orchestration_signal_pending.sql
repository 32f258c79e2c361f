-- The oldest signal of this name not yet consumed.
-- ?1 tenant, ?2 orchestration, ?3 name.
SELECT * FROM orchestration_signals
WHERE tenant_id = ?1 AND orchestration_id = ?2 AND name = ?3 AND consumed_at IS NULL
ORDER BY created_at, id
LIMIT 1
