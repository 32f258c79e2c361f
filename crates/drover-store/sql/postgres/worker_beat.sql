-- Insert or refresh a worker's liveness row. System role.
-- last_beat_at is the database clock, never the worker's: readers judge
-- liveness against the same clock (worker_list.sql).
-- $1 id, $2 host, $3 pid, $4 lanes, $5 capacity, $6 started_at, $7 state,
-- $8 beat_interval_ms, $9 kinds, $10 version.
INSERT INTO workers (id, host, pid, lanes, capacity, started_at, last_beat_at, state, beat_interval_ms, kinds, version)
VALUES ($1, $2, $3, $4, $5, $6, now(), $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE
SET host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    lanes = EXCLUDED.lanes,
    capacity = EXCLUDED.capacity,
    started_at = EXCLUDED.started_at,
    last_beat_at = EXCLUDED.last_beat_at,
    state = EXCLUDED.state,
    beat_interval_ms = EXCLUDED.beat_interval_ms,
    kinds = EXCLUDED.kinds,
    version = EXCLUDED.version
