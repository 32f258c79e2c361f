-- System role: the ring, locked for a rotation. Age of the current child
-- and of the oldest one (the next to be truncated), on the database clock.
SELECT slot, current, opened_at, closed_at, now() AS now
FROM event_slots ORDER BY slot FOR UPDATE
