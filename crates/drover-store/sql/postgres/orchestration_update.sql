-- The compare-and-set: lands only on the version the writer read, and bumps
-- it. Zero rows means a stale writer (or no such record). Runtime role.
-- A cancel request stays set whatever the writer read: the request lands
-- without a version bump, so a writer that read before it still matches.
UPDATE orchestrations
SET status = $3, step = $4, state = $5, parked_until = $6, waiting_for = $7,
    timeout_step = $8, completed = $9, history = $10, result = $11, error = $12,
    cancel_requested = cancel_requested OR $13, resume_as = $14, history_dropped = $15,
    version = version + 1, updated_at = now()
WHERE id = $1 AND version = $2
RETURNING *
