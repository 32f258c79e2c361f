-- Reopens a closed scope: deletes its closure's cell ?1; a row comes back
-- when the closure was in force (ahead of the clock ?2).
DELETE FROM rate_cells WHERE key = ?1 AND closed_by IS NOT NULL
RETURNING tat > ?2 AS live
