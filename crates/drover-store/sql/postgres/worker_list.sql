-- Worker rows, most recent beat first. System role.
-- A worker that is not offline and has not beaten for $1 of its own
-- intervals (by the database clock) is reported as `lost`: it died
-- without shutting down.
SELECT id, host, pid, lanes, capacity, started_at, last_beat_at, beat_interval_ms, kinds, version,
       CASE
           WHEN state <> 'offline'
                AND last_beat_at < now() - make_interval(secs => $1 * beat_interval_ms / 1000.0)
           THEN 'lost'
           ELSE state
       END AS state
FROM workers
ORDER BY last_beat_at DESC, id
