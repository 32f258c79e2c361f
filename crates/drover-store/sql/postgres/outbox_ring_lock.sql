-- The ring's current child and when it became current, locked for the
-- rotation (system role), with the database clock.
SELECT current, switched_at, now() AS now
FROM outbox_ring
FOR UPDATE
