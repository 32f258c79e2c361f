-- Worker rows, most recent beat first.
SELECT id, host, pid, lanes, capacity, started_at, last_beat_at, state FROM workers
ORDER BY last_beat_at DESC, id
