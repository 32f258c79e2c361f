-- Publishes a worker's liveness row; the first beat inserts it.
-- ?1 id, ?2 host, ?3 pid, ?4 lanes (JSON array), ?5 capacity,
-- ?6 started_at, ?7 last_beat_at (the store's clock, read under the write
-- lock), ?8 state, ?9 beat_interval_ms, ?10 kinds (JSON array), ?11 version.
INSERT INTO workers (id, host, pid, lanes, capacity, started_at, last_beat_at, state, beat_interval_ms, kinds, version)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, lanes = excluded.lanes,
    capacity = excluded.capacity, started_at = excluded.started_at,
    last_beat_at = excluded.last_beat_at, state = excluded.state,
    beat_interval_ms = excluded.beat_interval_ms, kinds = excluded.kinds,
    version = excluded.version
