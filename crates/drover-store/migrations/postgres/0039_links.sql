-- drover 0039: dependencies and batches (docs/dependencies.md).
--
-- A dependant waits as a pending row at available_at 9999-12-31 (the
-- claim's `available_at <= now()` never reaches it, so the claim statement
-- and items_claim are unchanged). Its edges are rows of item_deps, its
-- count of open dependencies a row of item_waits. An item that has
-- dependants, or is a batch member, carries `linked`; the trigger below
-- runs only for such a row, in the statement that makes it final (a
-- completion, a dead letter, a cancel, from any path), so the dependants
-- it lets run are released, and a batch's counters move, in the
-- transaction that finishes it. An unlinked row costs the trigger's WHEN.
--
-- Concurrency: the count of a dependant is decremented under its row's
-- lock, so when two dependencies finish at once the second decrement sees
-- the first's commit, and only the transaction that takes the count to
-- zero releases it. A batch's counters are one row: its last member's
-- transaction sees the batch complete and fires the callback, once (the
-- `fired` flag, and the callback's id minted when the batch was created).

ALTER TABLE items ADD COLUMN linked boolean NOT NULL DEFAULT false;

CREATE TABLE item_deps (
    tenant_id uuid    NOT NULL,
    dep_id    uuid    NOT NULL,
    item_id   uuid    NOT NULL,
    policy    text    NOT NULL CONSTRAINT item_deps_policy CHECK (policy IN ('fail', 'run', 'wait')),
    resolved  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (dep_id, item_id)
);
CREATE INDEX item_deps_item ON item_deps (item_id);

CREATE TABLE item_waits (
    tenant_id uuid        NOT NULL,
    item_id   uuid        PRIMARY KEY,
    deps_left integer     NOT NULL CONSTRAINT item_waits_left CHECK (deps_left >= 0),
    run_at    timestamptz
);

CREATE TABLE batches (
    tenant_id        uuid        NOT NULL,
    id               uuid        NOT NULL,
    callback_kind    text        NOT NULL,
    callback_lane    text        NOT NULL,
    callback_payload jsonb       NOT NULL,
    fire_when        text        NOT NULL CONSTRAINT batches_when CHECK (fire_when IN ('always', 'success', 'failure')),
    callback_id      uuid        NOT NULL,
    sealed           boolean     NOT NULL DEFAULT false,
    fired            boolean     NOT NULL DEFAULT false,
    total            bigint      NOT NULL DEFAULT 0,
    done             bigint      NOT NULL DEFAULT 0,
    failed           bigint      NOT NULL DEFAULT 0,
    cancelled        bigint      NOT NULL DEFAULT 0,
    created_by       uuid        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CONSTRAINT batches_counts CHECK (done >= 0 AND failed >= 0 AND cancelled >= 0
                                     AND done + failed + cancelled <= total),
    CONSTRAINT batches_fired_sealed CHECK (NOT fired OR sealed)
);

CREATE TABLE batch_members (
    tenant_id uuid    NOT NULL,
    item_id   uuid    PRIMARY KEY,
    batch_id  uuid    NOT NULL,
    counted   boolean NOT NULL DEFAULT false
);
CREATE INDEX batch_members_batch ON batch_members (tenant_id, batch_id);

ALTER TABLE item_deps ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_deps FORCE ROW LEVEL SECURITY;
ALTER TABLE item_waits ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_waits FORCE ROW LEVEL SECURITY;
ALTER TABLE batches ENABLE ROW LEVEL SECURITY;
ALTER TABLE batches FORCE ROW LEVEL SECURITY;
ALTER TABLE batch_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE batch_members FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_t   text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    FOREACH v_t IN ARRAY ARRAY['item_deps', 'item_waits', 'batches', 'batch_members'] LOOP
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                       v_t || '_runtime', v_t, v_rt, v_tenant, v_tenant);
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                       v_t || '_system', v_t, v_sys);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I, %I', v_t, v_rt, v_sys);
    END LOOP;
END
$$;

-- A linked item became final: release the dependants it lets run, dead-
-- letter those its failure fails (which finishes them in turn: the update
-- fires this trigger for each of them), count it in its batch.
CREATE FUNCTION items_linked_final() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_lane  text;
    v_batch uuid;
BEGIN
    FOR v_lane IN
        WITH e AS (
            UPDATE item_deps SET resolved = true
            WHERE dep_id = NEW.id AND NOT resolved
              AND (NEW.status = 'done' OR policy = 'run')
            RETURNING item_id
        ), w AS (
            UPDATE item_waits SET deps_left = deps_left - 1
            WHERE item_id IN (SELECT item_id FROM e)
            RETURNING item_id, deps_left, run_at
        ), rel AS (
            UPDATE items i
            SET available_at = greatest(now(), coalesce(w.run_at, now())), updated_at = now()
            FROM w
            WHERE i.id = w.item_id AND w.deps_left = 0
              AND i.status = 'pending' AND i.available_at = '9999-12-31 00:00:00+00'
            RETURNING i.lane
        )
        SELECT DISTINCT lane FROM rel
    LOOP
        PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':' || v_lane || '#' || txid_current());
    END LOOP;

    IF NEW.status <> 'done' THEN
        WITH e AS (
            UPDATE item_deps SET resolved = true
            WHERE dep_id = NEW.id AND NOT resolved AND policy = 'fail'
            RETURNING item_id
        ), f AS (
            UPDATE items i
            SET status = 'failed', last_error = format('dependency %s ended %s', NEW.id, NEW.status),
                updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
            FROM e
            WHERE i.id = e.item_id AND i.status = 'pending'
              AND i.available_at = '9999-12-31 00:00:00+00'
            RETURNING i.tenant_id, i.id, i.last_error
        )
        INSERT INTO audit (tenant_id, item_id, action, actor, detail)
        SELECT tenant_id, id, 'dead_letter', '00000000-0000-0000-0000-000000000000'::uuid, last_error FROM f;
    END IF;

    UPDATE batch_members SET counted = true
    WHERE item_id = NEW.id AND NOT counted
    RETURNING batch_id INTO v_batch;
    IF FOUND THEN
        UPDATE batches
        SET done = done + (NEW.status = 'done')::int,
            failed = failed + (NEW.status = 'failed')::int,
            cancelled = cancelled + (NEW.status = 'cancelled')::int
        WHERE tenant_id = NEW.tenant_id AND id = v_batch;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER items_linked_final AFTER UPDATE OF status ON items
    FOR EACH ROW
    WHEN (NEW.linked AND NEW.status IN ('done', 'failed', 'cancelled')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION items_linked_final();

-- A sealed batch whose members are all final: take the callback decision
-- once (fired), and enqueue the callback when `fire_when` holds. The
-- callback's id was minted with the batch, so even a second insert of it
-- would collide.
CREATE FUNCTION batches_fire() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    UPDATE batches SET fired = true
    WHERE tenant_id = NEW.tenant_id AND id = NEW.id AND NOT fired;
    IF FOUND AND (NEW.fire_when = 'always'
                  OR (NEW.fire_when = 'success' AND NEW.failed + NEW.cancelled = 0)
                  OR (NEW.fire_when = 'failure' AND NEW.failed + NEW.cancelled > 0)) THEN
        INSERT INTO items (
            id, tenant_id, kind, lane, payload, priority, status, available_at,
            attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by
        ) VALUES (
            NEW.callback_id, NEW.tenant_id, NEW.callback_kind, NEW.callback_lane,
            jsonb_build_object('batch', NEW.id, 'done', NEW.done, 'failed', NEW.failed,
                               'cancelled', NEW.cancelled, 'payload', NEW.callback_payload),
            0, 'pending', now(), 0, 5, 0, NEW.created_by, now(), now(), NEW.created_by
        )
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER batches_fire AFTER UPDATE ON batches
    FOR EACH ROW
    WHEN (NEW.sealed AND NOT NEW.fired AND NEW.done + NEW.failed + NEW.cancelled = NEW.total)
    EXECUTE FUNCTION batches_fire();
