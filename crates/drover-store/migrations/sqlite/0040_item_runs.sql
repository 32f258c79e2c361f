-- drover on SQLite 0040: each item's recent runs. The same table, trigger
-- and rules as the PostgreSQL migration of the same number (read its
-- header): one row per claim that ended, written by a trigger on the
-- transition out of `claimed` in the statement that ended it; slot
-- claim_seq mod 20 keeps the last 20 runs per item; the item purge deletes
-- runs that finished before its cutoff. Times are microseconds since the
-- epoch, ids 16-byte blobs, as in items.
CREATE TABLE item_runs (
    tenant_id   BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    item_id     BLOB    NOT NULL CHECK (length(item_id) = 16),
    slot        INTEGER NOT NULL CHECK (slot BETWEEN 0 AND 19),
    claim_seq   INTEGER NOT NULL,
    worker      TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN
                    ('done', 'retry', 'failed', 'cancelled', 'snoozed', 'released', 'lease_lost')),
    error       TEXT,
    PRIMARY KEY (item_id, slot)
) STRICT;

CREATE INDEX item_runs_finished ON item_runs (finished_at);

-- Not for a first claim that ends done (claim_seq 1): that run is the
-- item itself, and a row for it cost every completion of the common case
-- a second write (PostgreSQL's migration says more).
CREATE TRIGGER item_runs_end AFTER UPDATE OF status ON items
FOR EACH ROW WHEN OLD.status = 'claimed' AND NEW.status <> 'claimed'
    AND (NEW.status <> 'done' OR OLD.claim_seq > 1)
BEGIN
    INSERT OR REPLACE INTO item_runs (tenant_id, item_id, slot, claim_seq, worker, started_at,
                           finished_at, outcome, error)
    VALUES (
        NEW.tenant_id, NEW.id, OLD.claim_seq % 20, OLD.claim_seq, OLD.claimed_by,
        OLD.updated_at, NEW.updated_at,
        CASE
            WHEN OLD.lease_expires_at <= NEW.updated_at THEN 'lease_lost'
            WHEN NEW.status = 'done' THEN 'done'
            WHEN NEW.status = 'cancelled' THEN 'cancelled'
            WHEN NEW.status = 'failed' THEN 'failed'
            WHEN NEW.attempts > OLD.attempts THEN 'retry'
            WHEN NEW.available_at > NEW.updated_at THEN 'snoozed'
            ELSE 'released'
        END,
        CASE
            WHEN OLD.lease_expires_at <= NEW.updated_at OR NEW.status = 'failed'
                 OR NEW.attempts > OLD.attempts THEN NEW.last_error
            WHEN NEW.status = 'done' THEN NULL
            WHEN NEW.last_error IS NOT OLD.last_error THEN NEW.last_error
        END);
END;
