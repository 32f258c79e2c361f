-- Records one source's rate of a scope. System role; every row belongs to
-- the nil tenant (migration 0043). set_at is the database clock.
-- $1 scope, $2 name, $3 source, $4 count, $5 period_ms, $6 burst, $7 set_by.
INSERT INTO rate_limits (tenant_id, scope, name, source, count, period_ms, burst, set_at, set_by)
VALUES ('00000000-0000-0000-0000-000000000000', $1, $2, $3, $4, $5, $6, now(), $7)
ON CONFLICT (tenant_id, scope, name, source) DO UPDATE
SET count = EXCLUDED.count,
    period_ms = EXCLUDED.period_ms,
    burst = EXCLUDED.burst,
    set_at = EXCLUDED.set_at,
    set_by = EXCLUDED.set_by
RETURNING scope, name, source, count, period_ms, burst, set_at, set_by
