-- drover 0011: the transactional outbox, a ring of four list partitions
-- (outbox_0 … outbox_3) so done rows past retention go with a TRUNCATE of
-- a whole child, never a row-by-row DELETE (docs/design.md, "Why will the
-- hot table not bloat?"). Tenant-scoped; row-level security ENABLEd and
-- FORCEd on the parent and every child; policies and grants name this
-- installation's roles (drover_roles(), migration 0005).

-- Which child new rows go to, and since when. One row, of the nil tenant:
-- it carries no tenant data. The runtime role reads it (an insert's
-- default), only the system role moves it (the sweep's rotation).
CREATE TABLE outbox_ring (
    tenant_id   uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000'
                            CHECK (tenant_id = '00000000-0000-0000-0000-000000000000'),
    singleton   boolean     NOT NULL DEFAULT true PRIMARY KEY CHECK (singleton),
    current     smallint    NOT NULL CHECK (current BETWEEN 0 AND 3),
    switched_at timestamptz NOT NULL
);
INSERT INTO outbox_ring (current, switched_at) VALUES (0, now());

CREATE FUNCTION outbox_slot() RETURNS smallint LANGUAGE sql STABLE
    SET search_path FROM CURRENT
AS $$ SELECT current FROM outbox_ring $$;

CREATE TABLE outbox (
    slot             smallint    NOT NULL DEFAULT outbox_slot(),
    id               uuid        NOT NULL,
    tenant_id        uuid        NOT NULL,
    kind             text        NOT NULL CONSTRAINT outbox_kind_valid
                                 CHECK (kind ~ '^(work|event)\.[a-z0-9_.:-]{1,128}$'),
    payload          jsonb       NOT NULL,
    actor            uuid        NOT NULL,
    request_id       text,
    traceparent      text,
    created_at       timestamptz NOT NULL,
    status           text        NOT NULL DEFAULT 'pending' CONSTRAINT outbox_status_known
                                 CHECK (status IN ('pending', 'done', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    available_at     timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    claim_token      uuid,
    lease_expires_at timestamptz,
    relayed_at       timestamptz,
    -- A claim is token and lease together, and only a pending row has one.
    CONSTRAINT outbox_claim_whole CHECK ((claim_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT outbox_claim_pending CHECK (status = 'pending' OR claim_token IS NULL),
    CONSTRAINT outbox_done_relayed CHECK ((status = 'done') = (relayed_at IS NOT NULL)),
    -- Led by the id: the fenced writes find a row without knowing its child.
    PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);

CREATE TABLE outbox_0 PARTITION OF outbox FOR VALUES IN (0) WITH (fillfactor = 70);
CREATE TABLE outbox_1 PARTITION OF outbox FOR VALUES IN (1) WITH (fillfactor = 70);
CREATE TABLE outbox_2 PARTITION OF outbox FOR VALUES IN (2) WITH (fillfactor = 70);
CREATE TABLE outbox_3 PARTITION OF outbox FOR VALUES IN (3) WITH (fillfactor = 70);

-- The relay's claim and the lag gauge: pending rows, oldest first.
CREATE INDEX outbox_pending ON outbox (created_at) WHERE status = 'pending';
CREATE INDEX outbox_failed ON outbox (created_at) WHERE status = 'failed';
CREATE INDEX outbox_tenant_created ON outbox (tenant_id, created_at);

-- The relay's fast path: one NOTIFY per inserting statement, delivered at
-- commit (never for a rolled-back row). The name has a '.', which no lane
-- may, so workers ignore it.
CREATE FUNCTION outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':drover.outbox');
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_wake AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_wake();

ALTER TABLE outbox_ring ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_ring FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox_0 ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_0 FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox_1 ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_1 FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox_2 ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_2 FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox_3 ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_3 FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tbl text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    -- The ring row: read by every insert (its default), moved by the system.
    EXECUTE format('CREATE POLICY outbox_ring_runtime ON outbox_ring FOR SELECT TO %I USING (true)', v_rt);
    EXECUTE format('CREATE POLICY outbox_ring_system ON outbox_ring TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON outbox_ring TO %I', v_rt);
    EXECUTE format('GRANT SELECT, UPDATE ON outbox_ring TO %I', v_sys);
    -- The same policies on the parent and on each child, so a statement
    -- naming a child directly is scoped exactly as one through the parent.
    FOREACH v_tbl IN ARRAY ARRAY['outbox', 'outbox_0', 'outbox_1', 'outbox_2', 'outbox_3'] LOOP
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                       v_tbl || '_runtime', v_tbl, v_rt, v_tenant, v_tenant);
        -- The system role: the relay's claim and fenced marks, purge, stats.
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                       v_tbl || '_system', v_tbl, v_sys);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %I TO %I', v_tbl, v_rt);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %I TO %I', v_tbl, v_sys);
    END LOOP;
    -- TRUNCATE ignores RLS, so only the system role, which sees every row
    -- anyway, may empty a child (the retention purge).
    EXECUTE format('GRANT TRUNCATE ON outbox_0, outbox_1, outbox_2, outbox_3 TO %I', v_sys);
    EXECUTE format('GRANT EXECUTE ON FUNCTION outbox_slot() TO %I, %I', v_rt, v_sys);
END
$$;
