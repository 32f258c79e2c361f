-- Insert or refresh a worker's liveness row. System role.
INSERT INTO workers (id, host, pid, lanes, capacity, started_at, last_beat_at, state)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE
SET host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    lanes = EXCLUDED.lanes,
    capacity = EXCLUDED.capacity,
    started_at = EXCLUDED.started_at,
    last_beat_at = EXCLUDED.last_beat_at,
    state = EXCLUDED.state
