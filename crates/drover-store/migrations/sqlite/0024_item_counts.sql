-- drover 0024 (SQLite only): final rows counted by a rollup, not indexed.
--
-- 0016 kept an index of final rows (items_lane_status) so counts for one
-- lane would not read the whole table. That index cost every completion an
-- entry in a growing B-tree keyed by three text columns, on SQLite's one
-- write lock: about 3.5 µs per item, 9 % of the burst benchmark's drain.
-- (Triggers keeping a count per write were tried and cost more: a trigger
-- on items slows every insert and claim, not only the completions.)
--
-- So the sweep folds final rows into item_counts once they are settled:
-- updated before item_counts_mark.settled_to. Writes are serialized on
-- SQLite and each reads its clock under the write lock, so when the fold
-- (itself a write transaction) moves the mark to a second before its own
-- clock reading, every final row below the mark is committed and counted,
-- and every later write lands above it. A count reads the rollup, plus the
-- final rows at or above the mark (a range of items_final_updated), plus
-- the pending and claimed rows (their partial indexes), in one statement:
-- one snapshot, exact. The hot path writes nothing more than before.
--
-- The two writes that take a row out of a final status keep the rollup
-- right in their own transaction: an operator's retry and the purge
-- subtract the rows they move or delete that the rollup had counted.
DROP INDEX items_lane_status;

CREATE TABLE item_counts (
    lane      TEXT    NOT NULL,
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    kind      TEXT    NOT NULL,
    status    TEXT    NOT NULL CHECK (status IN ('done', 'failed', 'cancelled')),
    n         INTEGER NOT NULL,
    PRIMARY KEY (lane, tenant_id, kind, status)
) STRICT, WITHOUT ROWID;

-- One row: final rows updated before settled_to (microseconds) are in
-- item_counts. From 0, the first fold takes in every final row already here.
CREATE TABLE item_counts_mark (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    settled_to INTEGER NOT NULL
) STRICT;
INSERT INTO item_counts_mark (id, settled_to) VALUES (1, 0);
