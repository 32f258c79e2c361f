-- drover 0010: orchestration records and their signals, tenant-scoped with
-- row-level security ENABLEd and FORCEd like every table, granted to the
-- runtime and system roles the way 0001 grants.

CREATE TABLE orchestrations (
    id               uuid        PRIMARY KEY,
    tenant_id        uuid        NOT NULL,
    kind             text        NOT NULL CONSTRAINT orchestrations_kind_valid
                                 CHECK (kind ~ '^[a-z0-9_.:-]{1,128}$'),
    lane             text        NOT NULL,
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    status           text        NOT NULL CONSTRAINT orchestrations_status_known
                                 CHECK (status IN ('running', 'parked', 'stuck', 'completed',
                                        'compensating', 'compensated', 'compensation_failed', 'cancelled')),
    step             text        NOT NULL,
    state            jsonb       NOT NULL,
    -- Every write is a compare-and-set on it and bumps it by one.
    version          bigint      NOT NULL CHECK (version >= 1),
    parked_until     timestamptz,
    waiting_for      text,
    timeout_step     text,
    completed        jsonb       NOT NULL DEFAULT '[]',
    history          jsonb       NOT NULL DEFAULT '[]',
    result           jsonb,
    error            text,
    cancel_requested boolean     NOT NULL DEFAULT false,
    resume_as        text,
    idempotency_key  text        CHECK (idempotency_key IS NULL OR octet_length(idempotency_key) BETWEEN 1 AND 512),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- A parked record waits for a time (and maybe a signal); no other does.
    CONSTRAINT orchestrations_parked_has_time CHECK (status <> 'parked' OR parked_until IS NOT NULL),
    CONSTRAINT orchestrations_only_parked_waits
        CHECK (status = 'parked' OR (parked_until IS NULL AND waiting_for IS NULL))
);

CREATE UNIQUE INDEX orchestrations_tenant_key ON orchestrations (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The sweep's resume: parked records by park time.
CREATE INDEX orchestrations_parked ON orchestrations (parked_until) WHERE status = 'parked';
CREATE INDEX orchestrations_tenant_created ON orchestrations (tenant_id, created_at);

CREATE TABLE orchestration_signals (
    id               uuid        PRIMARY KEY,
    tenant_id        uuid        NOT NULL,
    orchestration_id uuid        NOT NULL REFERENCES orchestrations (id) ON DELETE CASCADE,
    name             text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 128),
    payload          jsonb       NOT NULL,
    idempotency_key  text        CHECK (idempotency_key IS NULL OR octet_length(idempotency_key) BETWEEN 1 AND 512),
    consumed_at      timestamptz,
    created_at       timestamptz NOT NULL
);

CREATE UNIQUE INDEX orchestration_signals_key
    ON orchestration_signals (tenant_id, orchestration_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX orchestration_signals_pending
    ON orchestration_signals (tenant_id, orchestration_id, name, created_at)
    WHERE consumed_at IS NULL;

ALTER TABLE orchestrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE orchestrations FORCE ROW LEVEL SECURITY;
ALTER TABLE orchestration_signals ENABLE ROW LEVEL SECURITY;
ALTER TABLE orchestration_signals FORCE ROW LEVEL SECURITY;

-- Policies and grants name this installation's own roles (migration 0005:
-- drover_roles() answers their names), never the cluster-wide legacy pair.
DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY orchestrations_runtime ON orchestrations TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY orchestration_signals_runtime ON orchestration_signals TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    -- The system role: the sweep's due list, the parked gauge, unscoped listing.
    EXECUTE format('CREATE POLICY orchestrations_system ON orchestrations TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('CREATE POLICY orchestration_signals_system ON orchestration_signals TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON orchestrations TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON orchestrations TO %I', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON orchestration_signals TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON orchestration_signals TO %I', v_sys);
END
$$;
