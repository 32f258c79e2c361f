-- The retention purge: finished records last written before the cutoff,
-- oldest first, across tenants (system role). A final record never changes
-- again, so the selection is the one the signals' statement made. $1
-- cutoff, $2 limit.
DELETE FROM orchestrations
WHERE id IN (
    SELECT id FROM orchestrations
    WHERE status IN ('completed', 'compensated', 'compensation_failed', 'cancelled')
      AND updated_at < $1
    ORDER BY updated_at, id
    LIMIT $2)
