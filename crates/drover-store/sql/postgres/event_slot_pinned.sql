-- System role: does the child hold an event a known projector has not
-- applied yet? Such a child pins the ring. A projector is known once it has
-- a checkpoint row of any tenant or a runner recorded it alive (0028); a
-- tenant without a row of a known projector counts as checkpoint 0, so a
-- tenant its runner has not reached yet keeps its events. Run with the
-- child locked, so no event lands in it meanwhile.
SELECT EXISTS (
    SELECT 1
    FROM (SELECT tenant_id, max(position) AS last FROM events WHERE slot = $1
          GROUP BY tenant_id) e
    CROSS JOIN (SELECT projector FROM projector_checkpoints
                UNION SELECT projector FROM projector_runners) p
    LEFT JOIN projector_checkpoints c
           ON c.tenant_id = e.tenant_id AND c.projector = p.projector
    WHERE e.last > COALESCE(c.position, 0)
) AS pinned
