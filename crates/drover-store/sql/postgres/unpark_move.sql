-- Gives back the parked items $1 still pending: available_at moves back
-- by exactly what parking added. System role.
UPDATE items
SET available_at = available_at - interval '31556952000 seconds'
WHERE id = ANY($1::uuid[]) AND status = 'pending'
  AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
