-- System role: checkpoint rows of one projector ($1) or of all (NULL).
SELECT tenant_id, projector, position, lease_holder,
       CASE WHEN lease_expires_at > now() THEN lease_expires_at END AS lease_expires_at,
       rebuild_requested, rebuilds, applied_at
FROM projector_checkpoints
WHERE $1::text IS NULL OR projector = $1
ORDER BY projector, tenant_id
