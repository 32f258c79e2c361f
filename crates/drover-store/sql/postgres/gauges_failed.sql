-- Items in the dead letter, from the count rollup as counts.sql reads it
-- ($1: the mark as read just before, for the planner). System role.
WITH mark AS (
    SELECT settled_to FROM item_counts_mark
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
)
SELECT ((SELECT coalesce(sum(n), 0) FROM item_counts WHERE status = 'failed')
      - (SELECT count(*) FROM item_counts_unfinal
         WHERE status = 'failed' AND was_updated_at < (SELECT settled_to FROM mark))
      + (SELECT count(*) FROM items
         WHERE status = 'failed'
           AND updated_at >= $1::timestamptz
           AND updated_at >= (SELECT settled_to FROM mark)))::bigint AS failed
