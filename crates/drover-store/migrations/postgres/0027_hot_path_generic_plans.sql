-- drover 0027: the claim and the batched completion keep one plan per
-- session instead of planning on every call.
--
-- Since 0026 items is partitioned, and neither statement can be pruned at
-- plan time (the claim has no id to prune on; the completion joins ids from
-- an array), so a custom plan covers every child: measured at 800 items/s
-- with six partitions, planning the claim's statement took 1.11 ms and its
-- execution 0.23 ms; the completion's, 0.65 ms and 0.20 ms. PL/pgSQL kept
-- custom plans because the generic plan's unknown LIMIT looks costlier.
--
-- A plan kept for a session must not depend on statistics: a child is
-- created empty minutes (with long retention, a day) before it fills, and
-- nothing re-plans while it fills, so a plan chosen while it was empty (a
-- sequential scan and a sort are cheapest there) would read the whole child
-- on every claim. Each statement has one right plan whatever the sizes:
-- the claim walks each partition's claim index in available_at order
-- (merged) and stops at the limit, then updates by primary key; the
-- completion looks up each id by primary key. The settings below allow only
-- that plan (a disabled method is still used where nothing else can serve,
-- so no statement is refused). Creating, detaching or dropping a child
-- invalidates the kept plans, so the next call plans over the new set.
--
-- Settings of the function, not of the session: they hold only while it
-- runs.
DO $do$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'claim_items(text, text[], text, float8, bigint)',
        'complete_items(uuid, uuid[], uuid[])'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
        EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off', f);
        EXECUTE format('ALTER FUNCTION %s SET enable_bitmapscan = off', f);
        EXECUTE format('ALTER FUNCTION %s SET enable_sort = off', f);
        EXECUTE format('ALTER FUNCTION %s SET enable_hashjoin = off', f);
        EXECUTE format('ALTER FUNCTION %s SET enable_mergejoin = off', f);
    END LOOP;
END
$do$;
