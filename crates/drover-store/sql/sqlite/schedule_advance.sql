-- Compare-and-set the last tick: moves only from the value the caller read
-- (?3, NULL for none) and only forward. Zero rows: another scheduler moved
-- it first. The items are inserted in the same transaction.
UPDATE schedules
SET last_tick = ?2, seen_at = ?5
WHERE tenant_id = ?4
  AND name = ?1
  AND last_tick IS ?3
  AND (last_tick IS NULL OR last_tick < ?2)
