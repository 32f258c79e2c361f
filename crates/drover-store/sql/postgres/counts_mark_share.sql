-- The count rollup's mark, held FOR SHARE until the rotation commits: no
-- settlement moves it meanwhile, so the rows the tally calls settled are
-- the rows item_counts holds (system role).
SELECT settled_to FROM item_counts_mark
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
FOR SHARE
