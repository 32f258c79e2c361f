-- An operator's cancel request on a running record: a compare-and-set on
-- the version that does not bump it, so the step in flight still lands its
-- transition (which keeps the flag, and the store then starts
-- compensation). Zero rows: the version moved, the record is not running,
-- or there is none. Runtime role. $1 id, $2 expected version.
UPDATE orchestrations SET cancel_requested = true, updated_at = now()
WHERE id = $1 AND version = $2 AND status = 'running'
RETURNING *
