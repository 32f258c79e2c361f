-- drover 0029 on SQLite: sync records get a revision (their write counter,
-- the compare-and-set of a local put) and a tombstone flag (the source
-- deleted the record), and an index for the retention purge of tombstones.
-- Conventions as in 0001.

ALTER TABLE sync_records ADD COLUMN revision INTEGER NOT NULL DEFAULT 1 CHECK (revision >= 1);
ALTER TABLE sync_records ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1));

-- Tombstones the purge may remove: deleted by the source, not changed
-- locally since, nothing parked.
CREATE INDEX sync_records_tombstones ON sync_records (reconciler, updated_at)
    WHERE deleted = 1 AND dirty = 0 AND review IS NULL;
