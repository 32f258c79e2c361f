-- Transactional enqueue, leaving: put back what insert_in_enter.sql saved.
SELECT set_config('role', $1, true) AS _role,
       set_config('search_path', $2, true) AS _path,
       set_config('drover.tenant_id', $3, true) AS _tenant
