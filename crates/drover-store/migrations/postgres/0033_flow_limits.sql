-- drover 0033: concurrency limits (docs/flow-control.md).
--
-- A limit counts every tenant's items ("at most 20 calls into the payment
-- provider"), so it is installation-wide: every row belongs to the nil
-- tenant, as lane_states' do, and the store reads and writes it under the
-- system role (the claim that enforces it runs there too). The table still
-- carries tenant_id and row-level security like every table; a runtime-role
-- session sees only its own tenant's rows, which for any real tenant is
-- none.
--
-- A scope holds at most two rows: the one declared in code (written by a
-- worker at its start) and the one an operator set, which wins until it is
-- cleared. Nothing here counts slots: a slot is a claimed item, so the
-- count cannot drift from what holds it.

CREATE TABLE flow_limits (
    tenant_id   uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    scope       text        NOT NULL CONSTRAINT flow_limits_scope CHECK (scope IN ('lane', 'kind', 'group')),
    name        text        NOT NULL CONSTRAINT flow_limits_name CHECK (
                                length(name) BETWEEN 1 AND 128
                                AND translate(name, 'abcdefghijklmnopqrstuvwxyz0123456789_.:-', '') = ''),
    source      text        NOT NULL CONSTRAINT flow_limits_source CHECK (source IN ('code', 'operator')),
    concurrency integer     NOT NULL CONSTRAINT flow_limits_concurrency CHECK (concurrency BETWEEN 1 AND 100000),
    set_at      timestamptz NOT NULL DEFAULT now(),
    set_by      uuid        NOT NULL,
    PRIMARY KEY (tenant_id, scope, name, source)
);

ALTER TABLE flow_limits ENABLE ROW LEVEL SECURITY;
ALTER TABLE flow_limits FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY flow_limits_runtime ON flow_limits TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY flow_limits_system ON flow_limits TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON flow_limits TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON flow_limits TO %I', v_sys);
END
$$;
