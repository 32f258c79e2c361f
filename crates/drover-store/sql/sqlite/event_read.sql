-- The tenant's events after a position, in position order. ?3 is a JSON
-- array of topics; empty means every topic. Gap-safe: one writer hands out
-- positions in commit order.
SELECT tenant_id, position, id, topic, payload, actor, request_id, traceparent, created_at
FROM events
WHERE tenant_id = ?1
  AND position > ?2
  AND (json_array_length(?3) = 0 OR topic IN (SELECT value FROM json_each(?3)))
ORDER BY position
LIMIT ?4
