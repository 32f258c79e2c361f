-- Parks the items ?1 (a JSON array of rowids) that are still pending and
-- unparked: available_at moves 31,556,952,000 s (1,000 years, in micros)
-- ahead. Each through the rowid. Changes no status, so no trigger fires
-- (they watch `status`). System operation.
UPDATE items
SET available_at = available_at + 31556952000000000
WHERE rowid IN (SELECT value FROM json_each(?1)) AND status = 'pending'
  AND available_at < 7258118400000000
