-- Moves child $1's parked (failed) rows into child $2, so emptying $1
-- never drops one.
UPDATE outbox SET slot = $2 WHERE slot = $1 AND status = 'failed'
