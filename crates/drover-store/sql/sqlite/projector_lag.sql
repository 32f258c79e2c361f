-- System: projector ?1's lag over every tenant in one read (?2 = now, in
-- microseconds): the tenants behind, the events behind, and the age of the
-- oldest retained event not applied yet.
SELECT count(*) AS tenants,
       COALESCE(sum(h.head - COALESCE(c.position, 0)), 0) AS behind_events,
       COALESCE(max(?2 - (SELECT e.created_at FROM events e
                          WHERE e.tenant_id = h.tenant_id
                            AND e.position > COALESCE(c.position, 0)
                          ORDER BY e.position LIMIT 1)), 0) AS behind_micros
FROM event_heads h
LEFT JOIN projector_checkpoints c ON c.tenant_id = h.tenant_id AND c.projector = ?1
WHERE h.head > COALESCE(c.position, 0)
