-- Gives back the parked items ?1 (a JSON array of rowids) still pending:
-- available_at moves back by exactly what parking added. System operation.
UPDATE items
SET available_at = available_at - 31556952000000000
WHERE rowid IN (SELECT value FROM json_each(?1)) AND status = 'pending'
  AND available_at >= 7258118400000000 AND available_at < 221845392000000000
