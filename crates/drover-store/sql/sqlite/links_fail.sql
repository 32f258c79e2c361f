-- A dependant enqueued after a dependency that already failed (policy
-- `fail`): dead-lettered now (the trigger finishes its own dependants).
-- ?1 tenant, ?2 id, ?3 last_error, ?4 now, ?5 system actor.
UPDATE items SET status = 'failed', last_error = ?3, updated_at = ?4, updated_by = ?5
WHERE tenant_id = ?1 AND id = ?2 AND status = 'pending'
