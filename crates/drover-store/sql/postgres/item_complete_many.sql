-- Batched completion of one tenant's items: one round trip into
-- complete_items (migration 0002 holds the fenced statement, run as the
-- runtime role under the tenant). {schema} is the validated schema name.
SELECT id FROM "{schema}".complete_items($1, $2, $3) AS t(id)
