-- drover 0053: the store's own enqueues send their wake-up after the
-- commit, not from the inserting transaction.
--
-- A transaction that NOTIFYs takes PostgreSQL's notify lock at its commit
-- and holds it through the commit's WAL flush, so concurrent enqueues
-- committed one flush after another (COMMITs waiting in `Lock:object`,
-- up to 557 ms under load in the soak's wait record). The store's own
-- insert transactions now set `drover.wake_after_commit` (SET LOCAL), and
-- the trigger then sends nothing: after the commit the store hands the
-- lane to its notifier, which sends one NOTIFY per lane for every
-- enqueue that committed meanwhile, in a transaction of its own that does
-- not wait for its flush (`synchronous_commit` off: a wake-up lost in a
-- crash costs one poll, never an item). Every other insert (an enqueue in
-- the caller's transaction, the outbox relay's batch, SQL from another
-- language) sets nothing and wakes at its commit as before. The claim
-- floors are kept as 0025's.
CREATE OR REPLACE FUNCTION items_wake() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO claim_floors (lane, priority)
    SELECT DISTINCT lane, priority FROM new_rows
    ON CONFLICT DO NOTHING;
    IF coalesce(current_setting('drover.wake_after_commit', true), '') <> 'on' THEN
        PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':' || lane || '#' || txid_current())
        FROM (SELECT DISTINCT lane FROM new_rows) AS lanes;
    END IF;
    RETURN NULL;
END $$;
