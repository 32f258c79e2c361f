-- Marks a point inside the write transaction to roll back to: a bulk
-- insert chunk that collided is undone and run again, reporting per row.
SAVEPOINT drover_chunk
