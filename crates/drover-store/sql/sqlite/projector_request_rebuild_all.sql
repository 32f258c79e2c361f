-- Asks the runners of a projector to rebuild every tenant it has a
-- checkpoint for.
UPDATE projector_checkpoints SET rebuild_requested = 1, updated_at = ?2 WHERE projector = ?1
