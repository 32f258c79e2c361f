-- Records one source's setting of a limit. System role; every row belongs
-- to the nil tenant (migration 0033). set_at is the database clock.
-- $1 scope, $2 name, $3 source, $4 concurrency, $5 set_by, $6 ordered,
-- $7 on_dead_letter.
INSERT INTO flow_limits (tenant_id, scope, name, source, concurrency, set_at, set_by,
                         ordered, on_dead_letter)
VALUES ('00000000-0000-0000-0000-000000000000', $1, $2, $3, $4, now(), $5, $6, $7)
ON CONFLICT (tenant_id, scope, name, source) DO UPDATE
SET concurrency = EXCLUDED.concurrency,
    set_at = EXCLUDED.set_at,
    set_by = EXCLUDED.set_by,
    ordered = EXCLUDED.ordered,
    on_dead_letter = EXCLUDED.on_dead_letter
RETURNING scope, name, source, concurrency, set_at, set_by,
          ordered::text AS ordered, on_dead_letter
