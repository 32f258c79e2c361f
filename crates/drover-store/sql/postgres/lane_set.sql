-- Records a lane as paused or running. System role; every row belongs to
-- the nil tenant (see migration 0018). changed_at is the database clock.
-- $1 tenant_id (nil), $2 lane, $3 paused, $4 changed_by.
INSERT INTO lane_states (tenant_id, lane, paused, changed_at, changed_by)
VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (tenant_id, lane) DO UPDATE
SET paused = EXCLUDED.paused,
    changed_at = EXCLUDED.changed_at,
    changed_by = EXCLUDED.changed_by
RETURNING lane, paused, changed_at, changed_by
