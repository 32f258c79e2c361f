-- drover 0029: sync records get a revision (their write counter, the
-- compare-and-set of a local put: `version` is the value's version, which a
-- source and a local writer may each set to the same number, so it cannot
-- fence) and a tombstone flag (the source deleted the record), and an index
-- for the retention purge of tombstones. sync_records keeps its row-level
-- security (ENABLEd and FORCEd in 0014); the purge runs as the system role,
-- which holds DELETE there.

ALTER TABLE sync_records
    ADD COLUMN revision bigint  NOT NULL DEFAULT 1 CHECK (revision >= 1),
    ADD COLUMN deleted  boolean NOT NULL DEFAULT false;

-- Tombstones the purge may remove: deleted by the source, not changed
-- locally since, nothing parked.
CREATE INDEX sync_records_tombstones ON sync_records (reconciler, updated_at)
    WHERE deleted AND NOT dirty AND review IS NULL;
