-- The rows of the link tables across tenants (system operation): what the
-- purge leaves of them (migration 0039; maint.rs).
SELECT (SELECT count(*) FROM item_deps) AS edges,
       (SELECT count(*) FROM item_waits) AS waits,
       (SELECT count(*) FROM batch_members) AS members,
       (SELECT count(*) FROM batches) AS batches
