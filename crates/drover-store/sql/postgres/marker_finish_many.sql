-- Store the answers of many requests of tenant $1 holding their markers.
-- Runtime role.
UPDATE idempotency_markers AS m
SET state = 'done', status = u.status, body = u.body
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int4[], $6::text[])
    AS u(principal_id, route, key, status, body)
WHERE m.tenant_id = $1 AND m.principal_id = u.principal_id AND m.route = u.route
  AND m.key = u.key AND m.state = 'in_flight'
