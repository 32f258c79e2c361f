-- Makes child $1 the one new rows go to.
UPDATE outbox_ring SET current = $1, switched_at = now()
