-- Tries, for this transaction, the advisory lock of each key ($2
-- principals, $3 routes, $4 keys) of one tenant ($1: the installation's
-- schema and the tenant, so two installations or tenants on one cluster
-- do not share locks); returns the keys whose lock another transaction
-- holds: requests with those keys are in flight. Never waits. Runtime role.
SELECT u.principal_id, u.route, u.key
FROM unnest($2::uuid[], $3::text[], $4::text[]) AS u(principal_id, route, key)
WHERE NOT pg_try_advisory_xact_lock(
    hashtext($1::text),
    hashtext(u.principal_id::text || ' ' || u.route || ' ' || u.key))
