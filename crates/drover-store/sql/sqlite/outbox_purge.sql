-- Deletes up to ?2 done rows relayed before ?1; never a pending or failed one.
DELETE FROM outbox
WHERE id IN (
    SELECT id FROM outbox WHERE status = 'done' AND relayed_at < ?1 LIMIT ?2
)
