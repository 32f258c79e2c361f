-- System role: the retention of removed projectors. Deletes the checkpoint
-- rows, last written before $1, of every projector no runner has recorded
-- alive since $1.
DELETE FROM projector_checkpoints c
WHERE c.updated_at < $1
  AND NOT EXISTS (SELECT 1 FROM projector_runners r
                  WHERE r.projector = c.projector AND r.seen_at >= $1)
