-- The retention purge, first statement: the signals of the finished records
-- the next statement deletes (the same selection), across tenants (system
-- role). ?1 cutoff, ?2 limit.
DELETE FROM orchestration_signals
WHERE orchestration_id IN (
    SELECT id FROM orchestrations
    WHERE status IN ('completed', 'compensated', 'compensation_failed', 'cancelled')
      AND updated_at < ?1
    ORDER BY updated_at, id
    LIMIT ?2)
