-- Records waiting on a time, a signal or an operator across tenants
-- (system operation), for the drover_records_parked gauge: parked and
-- stuck ones, and live ones whose current step item is failed or cancelled
-- (stranded until the sweep's repair moves them). The key as in
-- orchestration_dead_steps.sql.
SELECT count(*) FROM orchestrations o
WHERE o.status IN ('parked', 'stuck')
   OR (o.status IN ('running', 'compensating') AND EXISTS (
        SELECT 1 FROM items i
        WHERE i.tenant_id = o.tenant_id
          AND i.idempotency_key = 'drover.step:'
                || lower(substr(hex(o.id), 1, 8) || '-' || substr(hex(o.id), 9, 4) || '-'
                || substr(hex(o.id), 13, 4) || '-' || substr(hex(o.id), 17, 4) || '-'
                || substr(hex(o.id), 21, 12))
                || ':' || o.version
          AND i.status IN ('failed', 'cancelled')))
