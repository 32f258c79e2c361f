-- Records one source's rate of a scope.
-- ?1 scope, ?2 name, ?3 source, ?4 count, ?5 period_ms, ?6 burst,
-- ?7 now (micros), ?8 set_by.
INSERT INTO rate_limits (scope, name, source, count, period_ms, burst, set_at, set_by)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (scope, name, source) DO UPDATE
SET count = excluded.count,
    period_ms = excluded.period_ms,
    burst = excluded.burst,
    set_at = excluded.set_at,
    set_by = excluded.set_by
RETURNING scope, name, source, count, period_ms, burst, set_at, set_by
