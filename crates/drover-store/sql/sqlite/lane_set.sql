-- Records a lane as paused or running; every row belongs to the nil tenant.
-- ?1 tenant_id (nil), ?2 lane, ?3 paused (0/1), ?4 changed_at (the store's
-- clock, microseconds), ?5 changed_by.
INSERT INTO lane_states (tenant_id, lane, paused, changed_at, changed_by)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (tenant_id, lane) DO UPDATE SET
    paused = excluded.paused, changed_at = excluded.changed_at, changed_by = excluded.changed_by
RETURNING lane, paused, changed_at, changed_by
