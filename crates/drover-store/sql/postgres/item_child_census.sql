-- The rows of one child ([$1, $2) of ids, pruned to it) that its drop must
-- keep: pending, claimed, or final but updated since the cutoff $3. Each
-- part reads a partial index.
SELECT (SELECT count(*) FROM items WHERE id >= $1 AND id < $2 AND status = 'pending')
     + (SELECT count(*) FROM items WHERE id >= $1 AND id < $2 AND status = 'claimed')
     + (SELECT count(*) FROM items
        WHERE id >= $1 AND id < $2 AND status IN ('done', 'failed', 'cancelled')
          AND updated_at >= $3::timestamptz) AS survivors
