-- Reopens a closed scope: deletes its closure's cell $1; a row comes back
-- when the closure was in force.
DELETE FROM rate_cells
WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND key = $1 AND closed_by IS NOT NULL
RETURNING tat > now() AS live
