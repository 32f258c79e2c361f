-- drover 0030: the outbox row carries its item's attributes in columns of
-- its own, and an outbox id is one row across the whole ring.
--
-- 1. lane, priority, max_attempts. Before this migration a work.<kind>
--    row named its lane in the payload's "lane" entry, which the relay
--    removed, so a job with a field of that name could not be decoded.
--    Now the payload is the job's exactly; a row written before (lane IS
--    NULL) still relays as it was written (docs/design.md, "the outbox").
-- 2. outbox_id_once: the primary key is (id, slot), unique only inside one
--    child, so a write of an id already in another child of the ring
--    (written before a rotation) would be a second row, relayed again. A
--    BEFORE INSERT trigger on fresh rows (status pending; the rotation's
--    carry of failed rows moves rows, it never calls it) takes a
--    transaction lock on the id, so two writers of one id across a
--    rotation queue, and skips the row when any child of any tenant holds
--    the id (outbox_id_held, SECURITY DEFINER: RLS would hide another
--    tenant's row, and every backend keeps ids unique across tenants).
-- 3. outbox_claimed_events: the claim skips event.* rows of a tenant while
--    another live claim holds one of its event.* rows (one tenant's events
--    are relayed by one batch at a time, in row order); this index answers
--    that probe from the few claimed rows.

ALTER TABLE outbox
    ADD COLUMN lane text CONSTRAINT outbox_lane_valid CHECK (lane ~ '^[a-z0-9_-]{1,64}$'),
    ADD COLUMN priority smallint NOT NULL DEFAULT 0,
    ADD COLUMN max_attempts integer CONSTRAINT outbox_max_attempts_valid CHECK (max_attempts >= 1);

CREATE INDEX outbox_claimed_events ON outbox (tenant_id)
    WHERE claim_token IS NOT NULL AND kind LIKE 'event.%';

DO $$
DECLARE
    v_rt  text;
    v_sys text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    -- Runs as the owner, which every policy's system branch admits (the
    -- owner is a member of the system role, migration 0005); the pinned
    -- search_path keeps a caller's objects from being resolved in its place.
    EXECUTE format(
        $f$CREATE FUNCTION outbox_id_held(p_id uuid) RETURNS boolean
           LANGUAGE sql STABLE SECURITY DEFINER
           SET search_path = %I, pg_catalog
           AS 'SELECT EXISTS (SELECT 1 FROM outbox WHERE id = p_id)'$f$,
        current_schema());
    REVOKE ALL ON FUNCTION outbox_id_held(uuid) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION outbox_id_held(uuid) TO %I, %I', v_rt, v_sys);
END
$$;

-- Volatile: each statement below takes a fresh snapshot (READ COMMITTED),
-- so the check after the lock sees a writer of the same id that committed
-- while this one waited.
CREATE FUNCTION outbox_id_once() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('drover.outbox_id'), hashtext(NEW.id::text));
    IF outbox_id_held(NEW.id) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER outbox_id_once BEFORE INSERT ON outbox
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION outbox_id_once();
