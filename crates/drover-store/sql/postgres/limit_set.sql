-- Records one source's setting of a limit. System role; every row belongs
-- to the nil tenant (migration 0033). set_at is the database clock.
-- $1 scope, $2 name, $3 source, $4 concurrency, $5 set_by.
INSERT INTO flow_limits (tenant_id, scope, name, source, concurrency, set_at, set_by)
VALUES ('00000000-0000-0000-0000-000000000000', $1, $2, $3, $4, now(), $5)
ON CONFLICT (tenant_id, scope, name, source) DO UPDATE
SET concurrency = EXCLUDED.concurrency,
    set_at = EXCLUDED.set_at,
    set_by = EXCLUDED.set_by
RETURNING scope, name, source, concurrency, set_at, set_by
