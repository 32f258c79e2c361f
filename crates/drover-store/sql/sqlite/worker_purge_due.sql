-- Whether any worker's last beat is before ?1 (µs, the store's clock): the
-- read a worker purge makes first, so a pass with no dead worker's row to
-- delete takes no write lock.
SELECT 1 FROM workers WHERE last_beat_at < ?1 LIMIT 1
