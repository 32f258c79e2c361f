-- drover 0047: weighted fair share between tenants inside each lane
-- (docs/flow-control.md).
--
-- fair_weights: an operator's weight per tenant (no row: weight 1).
-- fair_lanes: the lanes an operator turned fair share off (or on again);
-- installation-wide, so every row belongs to the nil tenant, as
-- flow_limits' rows do.
-- fair_passes: the stride scheduler's state per lane: one row per (lane,
-- tenant) with the tenant's pass and the starts it was given, and the
-- lane's own row under the max UUID (which no tenant is given) holding
-- the lane's virtual time. A
-- fair claim locks the lane's row first (so the claims that share a lane
-- are serialised on it), reads the passes of the tenants it may start,
-- and writes the moved passes back in the same transaction as the items
-- it claims. A pass at or behind the lane's virtual time is the same as
-- no row: the sweep deletes it.
-- items_fair: the pending items of a lane by tenant, so a claim finds the
-- tenants with due work (one descent per tenant) and each tenant's next
-- items in claim order.

CREATE TABLE fair_weights (
    tenant_id uuid        NOT NULL PRIMARY KEY,
    weight    integer     NOT NULL CONSTRAINT fair_weights_weight CHECK (weight BETWEEN 1 AND 1000),
    set_at    timestamptz NOT NULL DEFAULT now(),
    set_by    uuid        NOT NULL
);

CREATE TABLE fair_lanes (
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    lane      text        NOT NULL,
    fair      boolean     NOT NULL,
    set_at    timestamptz NOT NULL DEFAULT now(),
    set_by    uuid        NOT NULL,
    PRIMARY KEY (tenant_id, lane)
);

CREATE TABLE fair_passes (
    lane      text   NOT NULL,
    tenant_id uuid   NOT NULL,
    pass      bigint NOT NULL,
    started   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, tenant_id)
);

CREATE INDEX items_fair ON items (lane, tenant_id, priority, available_at) WHERE status = 'pending';

ALTER TABLE fair_weights ENABLE ROW LEVEL SECURITY;
ALTER TABLE fair_weights FORCE ROW LEVEL SECURITY;
ALTER TABLE fair_lanes ENABLE ROW LEVEL SECURITY;
ALTER TABLE fair_lanes FORCE ROW LEVEL SECURITY;
ALTER TABLE fair_passes ENABLE ROW LEVEL SECURITY;
ALTER TABLE fair_passes FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
    t text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    FOREACH t IN ARRAY ARRAY['fair_weights', 'fair_lanes', 'fair_passes'] LOOP
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                       t || '_runtime', t, v_rt, v_tenant, v_tenant);
        EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                       t || '_system', t, v_sys);
        EXECUTE format('GRANT SELECT ON %I TO %I', t, v_rt);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', t, v_sys);
    END LOOP;
END
$$;
