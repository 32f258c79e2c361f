-- Records one source's setting of a limit.
-- ?1 scope, ?2 name, ?3 source, ?4 concurrency, ?5 now (micros), ?6 set_by,
-- ?7 ordered (0/1), ?8 on_dead_letter.
INSERT INTO flow_limits (scope, name, source, concurrency, set_at, set_by, ordered, on_dead_letter)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (scope, name, source) DO UPDATE
SET concurrency = excluded.concurrency,
    set_at = excluded.set_at,
    set_by = excluded.set_by,
    ordered = excluded.ordered,
    on_dead_letter = excluded.on_dead_letter
RETURNING scope, name, source, concurrency, set_at, set_by, ordered, on_dead_letter
