-- An operator's cancel request on a running record: a compare-and-set on
-- the version that does not bump it, so the step in flight still lands its
-- transition. Zero rows: the version moved, the record is not running, or
-- there is none. ?1 tenant, ?2 id, ?3 expected version, ?4 now.
UPDATE orchestrations SET cancel_requested = 1, updated_at = ?4
WHERE tenant_id = ?1 AND id = ?2 AND version = ?3 AND status = 'running'
RETURNING *
