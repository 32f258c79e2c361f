-- Removes a bounded batch (?2) of events appended before ?1 that every
-- known projector has passed. A projector is known once it has a
-- checkpoint row of any tenant or a runner recorded it alive (0028); a
-- tenant without a row of a known projector counts as checkpoint 0, so a
-- tenant its runner has not reached yet keeps its events. SQLite reuses the
-- freed pages without a vacuum (docs/design.md, "Why will the hot table not
-- bloat?").
DELETE FROM events
WHERE (tenant_id, position) IN (
    SELECT e.tenant_id, e.position FROM events e
    WHERE e.created_at < ?1
      AND NOT EXISTS (
          SELECT 1
          FROM (SELECT projector FROM projector_checkpoints
                UNION SELECT projector FROM projector_runners) p
          LEFT JOIN projector_checkpoints c
                 ON c.tenant_id = e.tenant_id AND c.projector = p.projector
          WHERE COALESCE(c.position, 0) < e.position)
    LIMIT ?2)
