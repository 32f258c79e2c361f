-- Every schedule row of the tenant (RLS scopes it), by name.
SELECT name, cron, zone, kind, lane, misfire, max_backfill, last_tick, created_at, seen_at
FROM schedules
ORDER BY name
