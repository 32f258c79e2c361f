-- Give up a marker still in flight. Runtime role.
DELETE FROM idempotency_markers
WHERE tenant_id = $1 AND principal_id = $2 AND route = $3 AND key = $4
  AND state = 'in_flight'
