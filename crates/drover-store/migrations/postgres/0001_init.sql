-- drover 0001: items, audit, workers; the runtime and system roles; row-level
-- security on every table.
--
-- Runs with search_path set to the target schema (PgStore::migrate creates it
-- first), so every object below is created in that schema unqualified.

-- Roles are cluster-wide: many schemas (and many tests migrating at once)
-- share them, so a concurrent creation is not an error.
DO $$
BEGIN
    CREATE ROLE drover_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

DO $$
BEGIN
    CREATE ROLE drover_system NOLOGIN NOSUPERUSER NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

-- The connecting (owning) user switches to these roles per transaction with
-- SET LOCAL ROLE, which needs membership unless it is a superuser.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'drover_runtime', 'MEMBER') THEN
        EXECUTE format('GRANT drover_runtime TO %I', current_user);
    END IF;
    IF NOT pg_has_role(current_user, 'drover_system', 'MEMBER') THEN
        EXECUTE format('GRANT drover_system TO %I', current_user);
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

CREATE TABLE items (
    id               uuid        PRIMARY KEY,
    tenant_id        uuid        NOT NULL,
    -- The name rules of item.rs: [a-z0-9_.:-]{1,128} and [a-z0-9_-]{1,64}.
    -- translate() removes every allowed character, so the check is a fast
    -- character-set test instead of a regex run per inserted row.
    kind             text        NOT NULL CONSTRAINT items_kind_name CHECK (
                                     length(kind) BETWEEN 1 AND 128
                                     AND translate(kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.:-', '') = ''),
    lane             text        NOT NULL CONSTRAINT items_lane_name CHECK (
                                     length(lane) BETWEEN 1 AND 64
                                     AND translate(lane, 'abcdefghijklmnopqrstuvwxyz0123456789_-', '') = ''),
    payload          jsonb       NOT NULL,
    priority         smallint    NOT NULL DEFAULT 0,
    status           text        NOT NULL CONSTRAINT items_status_known
                                 CHECK (status IN ('pending', 'claimed', 'done', 'failed', 'cancelled')),
    available_at     timestamptz NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0 CONSTRAINT items_attempts_nonneg CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL CONSTRAINT items_max_attempts_positive CHECK (max_attempts >= 1),
    claimed_by       text,
    claim_token      uuid,
    claim_seq        bigint      NOT NULL DEFAULT 0 CONSTRAINT items_claim_seq_nonneg CHECK (claim_seq >= 0),
    lease_expires_at timestamptz,
    last_error       text        CONSTRAINT items_last_error_bounded CHECK (octet_length(last_error) <= 2048),
    idempotency_key  text        CONSTRAINT items_key_bounded CHECK (octet_length(idempotency_key) BETWEEN 1 AND 512),
    created_by       uuid        NOT NULL,
    request_id       text,
    traceparent      text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    updated_by       uuid        NOT NULL,
    -- A claimed item carries its token, holder and lease; no other status does.
    CONSTRAINT items_claim_fields CHECK (
        (status = 'claimed' AND claim_token IS NOT NULL AND claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR
        (status <> 'claimed' AND claim_token IS NULL AND claimed_by IS NULL AND lease_expires_at IS NULL)
    )
) WITH (
    -- Every item is updated several times in its short life: leave room on
    -- the page for HOT updates and vacuum early and often.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);

-- The claim: equality on lane, then walked in (priority, available_at) order,
-- so the first rows of the index are the rows the claim wants. Only pending
-- rows are indexed, which keeps it small however much history the table holds.
CREATE INDEX items_claim ON items (lane, priority, available_at) WHERE status = 'pending';

-- The sweep: which tenants have expired leases (cross-tenant, a scan of this
-- small index), then each tenant's expired claims. Claimed rows are few.
CREATE INDEX items_tenant_stale ON items (tenant_id, lease_expires_at) WHERE status = 'claimed';

-- Purge by retention and the dead-letter gauge: final rows by age.
CREATE INDEX items_final ON items (status, updated_at) WHERE status IN ('done', 'failed', 'cancelled');

-- Listing walks the primary key backwards: ids are UUIDv7, so id order is
-- creation order, and no extra index is paid on every write of a hot table.

-- An idempotency key is unique per tenant while the row exists; rows without
-- a key cost no index entry.
CREATE UNIQUE INDEX items_tenant_key ON items (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE audit (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id uuid        NOT NULL,
    item_id   uuid        NOT NULL,
    action    text        NOT NULL CONSTRAINT audit_action_known CHECK (action IN ('dead_letter', 'cancel', 'retry')),
    actor     uuid        NOT NULL,
    detail    text        CONSTRAINT audit_detail_bounded CHECK (octet_length(detail) <= 2048),
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_tenant_item ON audit (tenant_id, item_id, at);

CREATE TABLE workers (
    id           text        PRIMARY KEY,
    -- Workers serve every tenant; their rows belong to the nil tenant.
    tenant_id    uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    lanes        text[]      NOT NULL,
    capacity     integer     NOT NULL CONSTRAINT workers_capacity_nonneg CHECK (capacity >= 0),
    started_at   timestamptz NOT NULL,
    last_beat_at timestamptz NOT NULL,
    state        text        NOT NULL CONSTRAINT workers_state_known CHECK (state IN ('running', 'draining', 'offline'))
);
CREATE INDEX workers_tenant_beat ON workers (tenant_id, last_beat_at DESC);

-- Row-level security: FORCEd so that even the owning role obeys it (only a
-- superuser, which bypasses RLS regardless, is exempt; drover never queries
-- data as the owner but always as one of the two roles below).
ALTER TABLE items ENABLE ROW LEVEL SECURITY;
ALTER TABLE items FORCE ROW LEVEL SECURITY;
ALTER TABLE audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit FORCE ROW LEVEL SECURITY;
ALTER TABLE workers ENABLE ROW LEVEL SECURITY;
ALTER TABLE workers FORCE ROW LEVEL SECURITY;

-- The runtime role sees exactly the tenant set for its transaction; with no
-- tenant set the comparison is NULL, so nothing is visible and every insert
-- is refused by the WITH CHECK.
CREATE POLICY items_runtime ON items TO drover_runtime
    USING (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid);
CREATE POLICY audit_runtime ON audit TO drover_runtime
    USING (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid);
CREATE POLICY workers_runtime ON workers TO drover_runtime
    USING (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid);

-- The system role runs the documented cross-tenant operations (claim, orphan
-- failure, stale-tenant discovery, purge, counts, gauges, unscoped listing,
-- the workers table). A policy rather than BYPASSRLS keeps RLS in force for
-- any other role it might be granted to.
CREATE POLICY items_system ON items TO drover_system USING (true) WITH CHECK (true);
CREATE POLICY audit_system ON audit TO drover_system USING (true) WITH CHECK (true);
CREATE POLICY workers_system ON workers TO drover_system USING (true) WITH CHECK (true);

DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO drover_runtime, drover_system', current_schema());
    EXECUTE format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA %I TO drover_runtime, drover_system', current_schema());
END $$;

-- No TRUNCATE for either role (it ignores RLS); the audit log is append-only.
GRANT SELECT, INSERT, UPDATE, DELETE ON items TO drover_runtime, drover_system;
GRANT SELECT, INSERT ON audit TO drover_runtime, drover_system;
GRANT SELECT, INSERT, UPDATE ON workers TO drover_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON workers TO drover_system;

-- Wake-ups: one NOTIFY per distinct lane per inserting statement, delivered
-- by PostgreSQL at commit (and never for a rolled-back insert). A trigger
-- covers every insert path (single, bulk, inside a caller's transaction) at
-- no extra round trip; rows skipped by ON CONFLICT DO NOTHING are not in the
-- transition table, so a collision wakes no one.
CREATE FUNCTION items_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':' || lane)
    FROM (SELECT DISTINCT lane FROM new_rows) AS lanes;
    RETURN NULL;
END $$;

CREATE TRIGGER items_wake AFTER INSERT ON items
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION items_wake();
