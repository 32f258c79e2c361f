-- Every stored setting of every limit (both sources). `ordered` and
-- `on_dead_letter` are read through the row's JSON so the statement also
-- runs on a schema before migration 0034 (a binary ahead of its database
-- until `drover migrate`), where they read NULL: no limit is ordered.
SELECT scope, name, source, concurrency, set_at, set_by,
       to_jsonb(f) ->> 'ordered' AS ordered,
       to_jsonb(f) ->> 'on_dead_letter' AS on_dead_letter
FROM flow_limits f
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'
ORDER BY scope, name, source
