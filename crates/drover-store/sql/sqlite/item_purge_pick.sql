-- One batch of final items last updated before ?1 (system operation; ?2
-- batch size), as a JSON array of rowids: the rows the two statements
-- after it subtract from the count rollup and delete, in one transaction.
SELECT json_group_array(rowid) FROM (
    SELECT rowid FROM items INDEXED BY items_final_updated
    WHERE status IN ('done', 'failed', 'cancelled') AND updated_at < ?1
    LIMIT ?2
)
