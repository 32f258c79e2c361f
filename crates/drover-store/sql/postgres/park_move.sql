-- Parks the items $1 that are still pending and unparked: available_at
-- moves 31,556,952,000 s (1,000 years) ahead. Each id through the primary
-- key. Changes no status, so no trigger fires. System role.
UPDATE items
SET available_at = available_at + interval '31556952000 seconds'
WHERE id = ANY($1::uuid[]) AND status = 'pending'
  AND available_at < '2200-01-01 00:00:00+00'
