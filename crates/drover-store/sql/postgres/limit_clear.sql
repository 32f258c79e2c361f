-- Removes one source's setting of a limit. $1 scope, $2 name, $3 source.
DELETE FROM flow_limits
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'
  AND scope = $1 AND name = $2 AND source = $3
