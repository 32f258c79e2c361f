-- drover 0046: the flow settings' generation (docs/flow-control.md,
-- "When a change takes effect").
--
-- One row per installation (the nil tenant, like rate_limits): a counter
-- that every change of the rates in force or of the closures (a rate set
-- or cleared, a scope closed or reopened) moves in the same transaction
-- as the change. Each process keeps the rates and closures it read with
-- the generation it read first; every claim reads the row in the same
-- statement (or transaction) that claims and, when it has moved, claims
-- nothing, reads the settings again and claims anew. So a closure that
-- committed before a claim began holds that claim back in every process,
-- with no cache lag, and a claim with nothing in force pays one read of
-- one row. Not tenant-scoped data, but it keeps the RLS of its siblings:
-- the system role reads and writes it, a tenant's runtime role sees none.

CREATE TABLE flow_generation (
    tenant_id uuid   NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000' PRIMARY KEY,
    gen       bigint NOT NULL
);

INSERT INTO flow_generation (gen) VALUES (1);

ALTER TABLE flow_generation ENABLE ROW LEVEL SECURITY;
ALTER TABLE flow_generation FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format($q$CREATE POLICY flow_generation_runtime ON flow_generation TO %I
                   USING (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)
                   WITH CHECK (tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid)$q$, v_rt);
    EXECUTE format('CREATE POLICY flow_generation_system ON flow_generation TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON flow_generation TO %I', v_rt);
    EXECUTE format('GRANT SELECT, UPDATE ON flow_generation TO %I', v_sys);
END
$$;
