-- drover 0012: the event log and the projectors' checkpoints.
--
-- The log is append-only and per tenant. A position is handed out only
-- while the appender holds its tenant's row of event_heads (locked from the
-- append to the commit), so positions are dense and in commit order: a
-- reader that sees position n committed knows every position below n is
-- committed, and `position > checkpoint` never skips an event that commits
-- later (docs/design.md, "Why are event positions handed out in commit
-- order?").
--
-- Retention without row-by-row deletes: events is partitioned into a ring
-- of four children by `slot`; appends go to the current child (event_slots),
-- and the purge truncates the oldest child once its events are past the
-- retention and every projector checkpoint of their tenants has passed
-- them, then makes it current (docs/design.md, "Why will the hot table not
-- bloat?").
--
-- Every table carries tenant_id, RLS ENABLEd and FORCEd, the installation's
-- own roles granted through drover_roles() as 0008 and 0010 do.

CREATE TABLE event_slots (
    -- The ring's bookkeeping holds no tenant data: it belongs to the nil
    -- tenant, like the workers table.
    tenant_id  uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    slot       smallint    PRIMARY KEY CHECK (slot BETWEEN 0 AND 3),
    current    boolean     NOT NULL,
    opened_at  timestamptz,
    -- When it stopped being current: every event in it is older.
    closed_at  timestamptz
);
CREATE UNIQUE INDEX event_slots_one_current ON event_slots (current) WHERE current;
INSERT INTO event_slots (slot, current, opened_at) VALUES (0, true, now()), (1, false, NULL),
    (2, false, NULL), (3, false, NULL);

CREATE TABLE event_heads (
    tenant_id  uuid        PRIMARY KEY,
    head       bigint      NOT NULL DEFAULT 0 CHECK (head >= 0),
    head_at    timestamptz
) WITH (fillfactor = 50);

CREATE TABLE events (
    tenant_id   uuid        NOT NULL,
    position    bigint      NOT NULL CHECK (position >= 1),
    slot        smallint    NOT NULL,
    id          uuid        NOT NULL,
    topic       text        NOT NULL CONSTRAINT events_topic_valid
                            CHECK (topic ~ '^[a-z0-9_.:-]{1,128}$'),
    payload     jsonb       NOT NULL,
    actor       uuid        NOT NULL,
    request_id  text,
    traceparent text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, position, slot)
) PARTITION BY LIST (slot);

CREATE TABLE events_0 PARTITION OF events FOR VALUES IN (0);
CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2);
CREATE TABLE events_3 PARTITION OF events FOR VALUES IN (3);
-- The idempotent append's lookup: an id is unique per tenant, enforced by
-- the append under the head lock (a unique index would have to include the
-- slot).
CREATE INDEX events_tenant_id ON events (tenant_id, id);

CREATE TABLE projector_checkpoints (
    tenant_id         uuid        NOT NULL,
    projector         text        NOT NULL CONSTRAINT projector_checkpoints_name_valid
                                  CHECK (projector ~ '^[a-z0-9_.:-]{1,128}$'),
    position          bigint      NOT NULL DEFAULT 0 CHECK (position >= 0),
    -- The one runner of (projector, tenant): a lease on the database clock.
    lease_token       uuid,
    lease_holder      text,
    lease_expires_at  timestamptz,
    rebuild_requested boolean     NOT NULL DEFAULT false,
    rebuilds          integer     NOT NULL DEFAULT 0,
    applied_at        timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, projector)
) WITH (fillfactor = 50);

ALTER TABLE event_slots ENABLE ROW LEVEL SECURITY;
ALTER TABLE event_slots FORCE ROW LEVEL SECURITY;
ALTER TABLE event_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE event_heads FORCE ROW LEVEL SECURITY;
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
ALTER TABLE events_0 ENABLE ROW LEVEL SECURITY;
ALTER TABLE events_0 FORCE ROW LEVEL SECURITY;
ALTER TABLE events_1 ENABLE ROW LEVEL SECURITY;
ALTER TABLE events_1 FORCE ROW LEVEL SECURITY;
ALTER TABLE events_2 ENABLE ROW LEVEL SECURITY;
ALTER TABLE events_2 FORCE ROW LEVEL SECURITY;
ALTER TABLE events_3 ENABLE ROW LEVEL SECURITY;
ALTER TABLE events_3 FORCE ROW LEVEL SECURITY;
ALTER TABLE projector_checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE projector_checkpoints FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
    t text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    FOREACH t IN ARRAY ARRAY['event_heads', 'events', 'projector_checkpoints'] LOOP
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                       t || '_runtime', t, v_rt, v_tenant, v_tenant);
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                       t || '_system', t, v_sys);
    END LOOP;
    -- Any tenant's appender reads which child is current; only the system
    -- role (the purge) moves it.
    EXECUTE format('CREATE POLICY event_slots_runtime ON event_slots FOR SELECT TO %I USING (true)', v_rt);
    EXECUTE format('CREATE POLICY event_slots_system ON event_slots TO %I USING (true) WITH CHECK (true)', v_sys);
    -- The log is append-only for the runtime role: no UPDATE, no DELETE.
    EXECUTE format('GRANT SELECT, INSERT ON events TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT ON events TO %I', v_sys);
    EXECUTE format('GRANT TRUNCATE ON events_0, events_1, events_2, events_3 TO %I', v_sys);
    EXECUTE format('GRANT SELECT ON event_slots TO %I', v_rt);
    EXECUTE format('GRANT SELECT, UPDATE ON event_slots TO %I', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON event_heads TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON event_heads TO %I', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON projector_checkpoints TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON projector_checkpoints TO %I', v_sys);
END
$$;
