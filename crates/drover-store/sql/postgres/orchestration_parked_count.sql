-- Records waiting on a time, a signal or an operator across tenants
-- (system role), for the drover_records_parked gauge: parked and stuck
-- ones, and live ones whose current step item is failed or cancelled
-- (stranded until the sweep's repair moves them).
SELECT count(*) FROM orchestrations o
WHERE o.status IN ('parked', 'stuck')
   OR (o.status IN ('running', 'compensating') AND EXISTS (
        SELECT 1 FROM items i
        WHERE i.tenant_id = o.tenant_id
          AND i.idempotency_key = 'drover.step:' || o.id::text || ':' || o.version::text
          AND i.status IN ('failed', 'cancelled')))
