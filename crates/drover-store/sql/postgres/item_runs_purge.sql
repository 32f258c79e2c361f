-- Up to $2 runs that finished before $1 (the item purge's cutoff), by the
-- finished_at index. System role: across tenants. SKIP LOCKED: a
-- concurrent purge takes other rows.
DELETE FROM item_runs WHERE ctid IN (
    SELECT ctid FROM item_runs WHERE finished_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED
)
