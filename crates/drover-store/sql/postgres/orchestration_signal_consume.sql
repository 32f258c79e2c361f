-- Marks a signal consumed, once. $1 signal id.
UPDATE orchestration_signals SET consumed_at = now()
WHERE id = $1 AND consumed_at IS NULL
