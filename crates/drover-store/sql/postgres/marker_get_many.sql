-- The markers of tenant $1 other requests hold or finished, for many keys.
-- Runtime role.
SELECT m.principal_id, m.route, m.key, m.fingerprint, m.state, m.status, m.body
FROM idempotency_markers AS m
JOIN unnest($2::uuid[], $3::text[], $4::text[]) AS u(principal_id, route, key)
  ON m.principal_id = u.principal_id AND m.route = u.route AND m.key = u.key
WHERE m.tenant_id = $1
