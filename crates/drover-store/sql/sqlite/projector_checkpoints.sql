-- Checkpoint rows of one projector (?1) or of all (NULL); a passed lease
-- (?2 = now) shows as none.
SELECT tenant_id, projector, position, lease_holder,
       CASE WHEN lease_expires_at > ?2 THEN lease_expires_at END AS lease_expires_at,
       rebuild_requested, rebuilds, applied_at
FROM projector_checkpoints
WHERE ?1 IS NULL OR projector = ?1
ORDER BY projector, tenant_id
