-- Every stored setting, on a schema before migration 0034 (a binary ahead
-- of its database until `drover migrate`): no limit is ordered yet.
SELECT scope, name, source, concurrency, set_at, set_by, 0 AS ordered, 'continue' AS on_dead_letter
FROM flow_limits
ORDER BY scope, name, source
