-- A dependant's count of open dependencies. ?1 tenant, ?2 item,
-- ?3 count, ?4 the time it asked to run at (NULL: none).
INSERT INTO item_waits (tenant_id, item_id, deps_left, run_at) VALUES (?1, ?2, ?3, ?4)
