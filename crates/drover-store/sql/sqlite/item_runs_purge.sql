-- Up to ?2 runs that finished before ?1 (the item purge's cutoff), by the
-- finished_at index.
DELETE FROM item_runs WHERE rowid IN (
    SELECT rowid FROM item_runs WHERE finished_at < ?1 LIMIT ?2
)
