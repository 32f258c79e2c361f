-- Every stored rate setting (both sources).
SELECT scope, name, source, count, period_ms, burst, set_at, set_by
FROM rate_limits
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'
ORDER BY scope, name, source
