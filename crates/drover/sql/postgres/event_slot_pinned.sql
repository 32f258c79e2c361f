-- System role: does the child hold an event a projector of its tenant has
-- not applied yet? Such a child pins the ring.
SELECT EXISTS (
    SELECT 1 FROM events e
    JOIN projector_checkpoints c ON c.tenant_id = e.tenant_id
    WHERE e.slot = $1 AND e.position > c.position
) AS pinned
