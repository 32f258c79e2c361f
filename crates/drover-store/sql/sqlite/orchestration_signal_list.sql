-- A record's signals, oldest first. ?1 tenant, ?2 orchestration.
SELECT * FROM orchestration_signals
WHERE tenant_id = ?1 AND orchestration_id = ?2
ORDER BY created_at, id
