-- Deletes the rows of workers whose last beat is older than $1 seconds by
-- the database clock (offline or lost long ago: a live worker beats every
-- few seconds). System role. The table holds one row per worker process
-- run, so one statement is bounded by the number of runs in the window.
DELETE FROM workers
WHERE last_beat_at < now() - make_interval(secs => $1)
