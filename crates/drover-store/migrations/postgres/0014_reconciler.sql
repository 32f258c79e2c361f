-- drover 0014: the sync reconciler's checkpoints and the records they
-- cover, tenant-scoped with row-level security ENABLEd and FORCEd like every
-- table; and an index for the sweep's search of live orchestrations whose
-- step item was dead-lettered.

-- One row per (tenant, reconciler): the source's cursor after the last
-- applied batch, moved by a compare-and-set on version in the transaction
-- that writes the batch's records.
CREATE TABLE sync_checkpoints (
    tenant_id   uuid        NOT NULL,
    reconciler  text        NOT NULL CONSTRAINT sync_checkpoints_name_valid
                            CHECK (reconciler ~ '^[a-z0-9_.:-]{1,128}$'),
    cursor      text        NOT NULL CHECK (octet_length(cursor) BETWEEN 1 AND 4096),
    version     bigint      NOT NULL CHECK (version >= 1),
    applied     bigint      NOT NULL DEFAULT 0 CHECK (applied >= 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, reconciler)
);

-- The local copy of each source record. dirty: changed locally since it
-- last took the source's value; review: a source change parked for an
-- operator (park_for_review), never dropped.
CREATE TABLE sync_records (
    tenant_id      uuid        NOT NULL,
    reconciler     text        NOT NULL,
    key            text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 512),
    data           jsonb       NOT NULL,
    version        bigint      NOT NULL,
    source_version bigint,
    dirty          boolean     NOT NULL DEFAULT false,
    review         jsonb,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, reconciler, key)
);

-- Records parked for review, listed by the CLI.
CREATE INDEX sync_records_in_review ON sync_records (tenant_id, reconciler, key)
    WHERE review IS NOT NULL;

-- The sweep looks for live records whose step item is in the dead letter;
-- finished records (the bulk of the table) stay out of that search.
CREATE INDEX orchestrations_live ON orchestrations (updated_at)
    WHERE status IN ('running', 'compensating');

ALTER TABLE sync_checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE sync_checkpoints FORCE ROW LEVEL SECURITY;
ALTER TABLE sync_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE sync_records FORCE ROW LEVEL SECURITY;

-- Policies and grants name this installation's own roles (drover_roles(),
-- migration 0005), never the cluster-wide legacy pair.
DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY sync_checkpoints_runtime ON sync_checkpoints TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY sync_records_runtime ON sync_records TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    -- The system role: the cross-tenant checkpoint listing of the CLI.
    EXECUTE format('CREATE POLICY sync_checkpoints_system ON sync_checkpoints TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('CREATE POLICY sync_records_system ON sync_records TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON sync_checkpoints TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON sync_checkpoints TO %I', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON sync_records TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON sync_records TO %I', v_sys);
END
$$;
