-- Moves a checkpoint past a batch: a compare-and-set on its version, so of
-- two runners that pulled the same batch one lands and the other matches
-- nothing (it waits on this row's lock, then re-reads the new version).
-- $1 reconciler, $2 expected version, $3 new cursor, $4 changes applied.
UPDATE sync_checkpoints
SET cursor = $3, version = version + 1, applied = applied + $4, updated_at = now()
WHERE reconciler = $1 AND version = $2
RETURNING version
