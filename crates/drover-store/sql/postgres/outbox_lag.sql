-- The age of the oldest pending row in seconds, 0 when none (system role;
-- one probe of the pending index).
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS lag_seconds
FROM outbox
WHERE status = 'pending'
