-- Deletes the wait minutes before ?1 (µs; a range of the primary key).
DELETE FROM queue_waits WHERE minute < ?1
