-- Marks the items a linked enqueue names (dependencies, batch members) as
-- linked, locking each row until the enqueue commits, and returns each
-- one's status as of that lock. Runs as the runtime role for the tenant:
-- another tenant's item is not seen, so it is reported as unknown.
UPDATE items SET linked = true
WHERE id = ANY($1::uuid[])
RETURNING id, status
