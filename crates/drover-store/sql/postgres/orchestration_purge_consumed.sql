-- The retention purge of consumed signals (of live records too), consumed
-- before the cutoff, oldest first, across tenants (system role). $1
-- cutoff, $2 limit.
DELETE FROM orchestration_signals
WHERE id IN (
    SELECT id FROM orchestration_signals
    WHERE consumed_at < $1
    ORDER BY consumed_at, id
    LIMIT $2)
