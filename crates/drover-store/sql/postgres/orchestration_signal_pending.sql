-- The oldest signal of this name not yet consumed. $1 orchestration, $2 name.
SELECT * FROM orchestration_signals
WHERE orchestration_id = $1 AND name = $2 AND consumed_at IS NULL
ORDER BY created_at, id
LIMIT 1
