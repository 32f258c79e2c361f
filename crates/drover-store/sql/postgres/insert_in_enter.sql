-- Transactional enqueue, entering: remember the caller's role, search_path
-- and tenant, then switch to the installation's runtime role, the store's
-- schema ($1) and the item's tenant ($2) for the rest of this
-- (sub)transaction only. {schema} is the validated schema name: the role's
-- name comes from the schema's drover_roles() (migration 0005).
SELECT current_setting('role') AS prev_role,
       current_setting('search_path') AS prev_search_path,
       coalesce(current_setting('drover.tenant_id', true), '') AS prev_tenant,
       set_config('search_path', $1, true) AS _path,
       set_config('drover.tenant_id', $2, true) AS _tenant,
       set_config('role', (SELECT runtime_role FROM "{schema}".drover_roles()), true) AS _role
