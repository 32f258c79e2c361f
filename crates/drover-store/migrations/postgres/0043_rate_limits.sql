-- drover 0043: rate limits (docs/flow-control.md), a generic cell rate on
-- the scopes of the concurrency limits (a lane, a kind, each group of a
-- kind).
--
-- rate_limits holds the settings as flow_limits does (migration 0033):
-- installation-wide, so every row belongs to the nil tenant and the store
-- reads and writes it under the system role; at most two rows per scope,
-- the code's and the operator's, which wins until it is cleared.
--
-- rate_cells holds one cell per scope key a claim started against: its
-- theoretical arrival time (tat). A claim a rate applies to locks the
-- cells it needs (an upsert, in key order, so two claimers never wait on
-- each other in a circle), admits on the transaction's now(), and writes
-- the moved cells back in the same transaction as the items it claims.
-- A cell whose tat has passed is the same as no cell: the sweep may
-- delete it. A claim no rate applies to never reads this table.

CREATE TABLE rate_limits (
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    scope     text        NOT NULL CONSTRAINT rate_limits_scope CHECK (scope IN ('lane', 'kind', 'group')),
    name      text        NOT NULL CONSTRAINT rate_limits_name CHECK (
                              length(name) BETWEEN 1 AND 128
                              AND translate(name, 'abcdefghijklmnopqrstuvwxyz0123456789_.:-', '') = ''),
    source    text        NOT NULL CONSTRAINT rate_limits_source CHECK (source IN ('code', 'operator')),
    count     integer     NOT NULL CONSTRAINT rate_limits_count CHECK (count BETWEEN 1 AND 1000000),
    period_ms bigint      NOT NULL CONSTRAINT rate_limits_period CHECK (period_ms BETWEEN 1 AND 604800000),
    burst     integer     NOT NULL CONSTRAINT rate_limits_burst CHECK (burst BETWEEN 1 AND 1000000),
    set_at    timestamptz NOT NULL DEFAULT now(),
    set_by    uuid        NOT NULL,
    PRIMARY KEY (tenant_id, scope, name, source)
);

CREATE TABLE rate_cells (
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    key       text        NOT NULL,
    tat       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

ALTER TABLE rate_limits ENABLE ROW LEVEL SECURITY;
ALTER TABLE rate_limits FORCE ROW LEVEL SECURITY;
ALTER TABLE rate_cells ENABLE ROW LEVEL SECURITY;
ALTER TABLE rate_cells FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
    t text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    FOREACH t IN ARRAY ARRAY['rate_limits', 'rate_cells'] LOOP
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                       t || '_runtime', t, v_rt, v_tenant, v_tenant);
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                       t || '_system', t, v_sys);
        EXECUTE format('GRANT SELECT ON %I TO %I', t, v_rt);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', t, v_sys);
    END LOOP;
END
$$;
