-- Every stored rate setting (both sources).
SELECT scope, name, source, count, period_ms, burst, set_at, set_by
FROM rate_limits
ORDER BY scope, name, source
