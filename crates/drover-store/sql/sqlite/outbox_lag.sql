-- The oldest pending row's creation time (NULL when none waits).
SELECT min(created_at) AS oldest FROM outbox WHERE status = 'pending'
