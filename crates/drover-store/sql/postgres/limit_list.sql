-- Every stored setting of every limit (both sources).
SELECT scope, name, source, concurrency, set_at, set_by
FROM flow_limits
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'
ORDER BY scope, name, source
