-- Every stored setting of every limit (both sources).
SELECT scope, name, source, concurrency, set_at, set_by, ordered, on_dead_letter
FROM flow_limits
ORDER BY scope, name, source
