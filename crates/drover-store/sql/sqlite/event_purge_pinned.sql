-- Whether an event older than ?1 is kept because a projector checkpoint of
-- its tenant has not passed it.
SELECT EXISTS (SELECT 1 FROM events WHERE created_at < ?1) AS pinned
