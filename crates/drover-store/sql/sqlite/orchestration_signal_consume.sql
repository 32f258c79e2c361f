-- Marks a signal consumed, once. ?1 tenant, ?2 signal id, ?3 now.
UPDATE orchestration_signals SET consumed_at = ?3
WHERE tenant_id = ?1 AND id = ?2 AND consumed_at IS NULL
