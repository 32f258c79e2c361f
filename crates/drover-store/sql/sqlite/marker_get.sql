-- The marker another request holds or finished.
SELECT fingerprint, state, status, body
FROM idempotency_markers
WHERE tenant_id = ?1 AND principal_id = ?2 AND route = ?3 AND key = ?4
