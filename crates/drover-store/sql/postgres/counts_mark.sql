-- Where the count rollup is settled to: final rows updated before it are in
-- item_counts. System role.
SELECT settled_to FROM item_counts_mark WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
