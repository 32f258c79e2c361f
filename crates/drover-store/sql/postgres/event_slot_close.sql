-- System role: the current child stops being current; every event in it is
-- older than now.
UPDATE event_slots SET current = false, closed_at = now() WHERE current
