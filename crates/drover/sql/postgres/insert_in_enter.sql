-- Transactional enqueue, entering: remember the caller's role, search_path
-- and tenant, then switch to drover_runtime, the store's schema ($1) and the
-- item's tenant ($2) for the rest of this (sub)transaction only.
SELECT current_setting('role') AS prev_role,
       current_setting('search_path') AS prev_search_path,
       coalesce(current_setting('drover.tenant_id', true), '') AS prev_tenant,
       set_config('search_path', $1, true) AS _path,
       set_config('drover.tenant_id', $2, true) AS _tenant,
       set_config('role', 'drover_runtime', true) AS _role
