-- The tenant's events already holding any of these ids (the idempotent
-- append), read under the head lock so no concurrent append of the same id
-- can slip in between.
SELECT id, position FROM events WHERE tenant_id = $1 AND id = ANY($2::uuid[])
