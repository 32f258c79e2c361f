-- Worker rows, most recent beat first. ?1 now (µs, the store's clock),
-- ?2 the beats a worker may miss before it is reported `lost` (not
-- offline, and no beat for ?2 of its own intervals: it died without
-- shutting down).
SELECT id, host, pid, lanes, capacity, started_at, last_beat_at, beat_interval_ms, kinds, version,
       CASE
           WHEN state <> 'offline' AND last_beat_at < ?1 - ?2 * beat_interval_ms * 1000
           THEN 'lost'
           ELSE state
       END AS state
FROM workers
ORDER BY last_beat_at DESC, id
