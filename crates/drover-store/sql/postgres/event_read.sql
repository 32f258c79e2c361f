-- The tenant's events after a position, in position order. Gap-safe as
-- written: positions are handed out in commit order (0012), so every
-- position below a visible one is visible. $3 empty: every topic.
SELECT tenant_id, position, id, topic, payload, actor, request_id, traceparent, created_at
FROM events
WHERE tenant_id = $1
  AND position > $2
  AND (cardinality($3::text[]) = 0 OR topic = ANY($3::text[]))
ORDER BY position
LIMIT $4
