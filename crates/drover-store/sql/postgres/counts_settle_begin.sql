-- The start of a settlement (system role): the mark, locked so settlements
-- run one at a time, and how far this one may go. A final row updated
-- before that point was written by a transaction that started before it
-- (updated_at is now(), the writer's start), and no transaction that old
-- is still open, so every such row is committed and visible to the next
-- statement's snapshot. A second is kept back for clock steps.
SELECT settled_to,
       least(now(), coalesce(drover_oldest_xact_start(), now())) - interval '1 second' AS upto
FROM item_counts_mark
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
FOR UPDATE
