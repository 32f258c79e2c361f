-- Deletes the rows of workers whose last beat is before ?1 (µs, the
-- store's clock): offline or lost long ago.
DELETE FROM workers WHERE last_beat_at < ?1
