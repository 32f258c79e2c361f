-- System role: asks the runners of a projector to rebuild every tenant it
-- has a checkpoint for.
UPDATE projector_checkpoints SET rebuild_requested = true, updated_at = now() WHERE projector = $1
