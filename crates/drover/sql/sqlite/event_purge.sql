-- Removes a bounded batch (?2) of events appended before ?1 that every
-- projector checkpoint of their tenant has passed. SQLite reuses the freed
-- pages without a vacuum (docs/design.md, "Why will the hot table not
-- bloat?").
DELETE FROM events
WHERE (tenant_id, position) IN (
    SELECT e.tenant_id, e.position FROM events e
    WHERE e.created_at < ?1
      AND NOT EXISTS (SELECT 1 FROM projector_checkpoints c
                      WHERE c.tenant_id = e.tenant_id AND c.position < e.position)
    LIMIT ?2)
