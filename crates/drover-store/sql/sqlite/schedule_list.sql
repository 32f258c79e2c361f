-- Every schedule row of the tenant, by name.
SELECT name, cron, zone, kind, lane, misfire, max_backfill, last_tick, created_at, seen_at
FROM schedules
WHERE tenant_id = ?1
ORDER BY name
