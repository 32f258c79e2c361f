-- Declare a schedule: insert its row, or refresh the declaration and
-- seen_at, never touching last_tick. Runtime role, nil tenant.
INSERT INTO schedules (tenant_id, name, cron, zone, kind, lane, misfire, max_backfill)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, name) DO UPDATE
SET cron = EXCLUDED.cron,
    zone = EXCLUDED.zone,
    kind = EXCLUDED.kind,
    lane = EXCLUDED.lane,
    misfire = EXCLUDED.misfire,
    max_backfill = EXCLUDED.max_backfill,
    seen_at = now()
RETURNING name, cron, zone, kind, lane, misfire, max_backfill, last_tick, created_at, seen_at
