-- Declare a schedule: insert its row, or refresh the declaration and
-- seen_at ($9, the store's clock), never touching last_tick.
INSERT INTO schedules (tenant_id, name, cron, zone, kind, lane, misfire, max_backfill,
                       last_tick, created_at, seen_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?9)
ON CONFLICT (tenant_id, name) DO UPDATE
SET cron = excluded.cron,
    zone = excluded.zone,
    kind = excluded.kind,
    lane = excluded.lane,
    misfire = excluded.misfire,
    max_backfill = excluded.max_backfill,
    seen_at = excluded.seen_at
RETURNING name, cron, zone, kind, lane, misfire, max_backfill, last_tick, created_at, seen_at
