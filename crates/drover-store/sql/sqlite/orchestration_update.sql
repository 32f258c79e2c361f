-- The compare-and-set: lands only on the version the writer read, and bumps
-- it. Zero rows means a stale writer (or no such record).
-- ?1 tenant, ?2 id, ?3 expected version, ?4 status, ?5 step, ?6 state,
-- ?7 parked_until, ?8 waiting_for, ?9 timeout_step, ?10 completed,
-- ?11 history, ?12 result, ?13 error, ?14 cancel_requested, ?15 resume_as,
-- ?16 now, ?17 history_dropped. A cancel request stays set whatever the
-- writer read: the request lands without a version bump.
UPDATE orchestrations
SET status = ?4, step = ?5, state = ?6, parked_until = ?7, waiting_for = ?8,
    timeout_step = ?9, completed = ?10, history = ?11, result = ?12, error = ?13,
    cancel_requested = max(cancel_requested, ?14), resume_as = ?15,
    history_dropped = ?17, version = version + 1, updated_at = ?16
WHERE tenant_id = ?1 AND id = ?2 AND version = ?3
RETURNING *
