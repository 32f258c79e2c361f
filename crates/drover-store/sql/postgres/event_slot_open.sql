-- System role: the child just truncated becomes the current one.
UPDATE event_slots SET current = true, opened_at = now(), closed_at = NULL WHERE slot = $1
