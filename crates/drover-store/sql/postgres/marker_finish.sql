-- Store the answer of the request holding the marker. Runtime role.
UPDATE idempotency_markers
SET state = 'done', status = $5, body = $6
WHERE tenant_id = $1 AND principal_id = $2 AND route = $3 AND key = $4
  AND state = 'in_flight'
