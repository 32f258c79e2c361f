-- A record's signals, oldest first. $1 orchestration.
SELECT * FROM orchestration_signals WHERE orchestration_id = $1
ORDER BY created_at, id
