-- drover 0056: fair share by group inside each tenant's share, an option
-- per lane (docs/flow-control.md, "Fair share by group").
--
-- fair_lanes.by_group: the lane shares each tenant's starts between its
-- groups with due work (false: by tenant only, as before).
-- fair_group_passes: the inner stride scheduler's state: one row per
-- (lane, tenant, group) that started work in a lane shared by group, with
-- the group's pass and its starts; the items with no group are the bucket
-- under group_key '' and the tenant's group virtual time is the row under
-- '*' (a group's name is [a-z0-9_.:-]{1,128}, so neither is one). A fair
-- claim writes the moved rows in the transaction of the items it claims,
-- under its lane's locked pass row. The sweep deletes idle rows (at or
-- behind the tenant's group virtual time, or with nothing pending).
-- items_fair_group: the pending items of a lane by tenant and group, so a
-- claim finds a tenant's groups with pending work (one descent per group)
-- and each group's next items in claim order without walking another
-- group's backlog. Partial on group_key IS NOT NULL: an ungrouped enqueue
-- writes nothing more. items_group_next (0050) cannot serve: it leads
-- with (tenant_id, kind) and has no lane.

ALTER TABLE fair_lanes ADD COLUMN by_group boolean NOT NULL DEFAULT false;

CREATE TABLE fair_group_passes (
    lane      text   NOT NULL,
    tenant_id uuid   NOT NULL,
    group_key text   NOT NULL,
    pass      bigint NOT NULL,
    started   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, tenant_id, group_key)
);

CREATE INDEX items_fair_group ON items (lane, tenant_id, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL;

ALTER TABLE fair_group_passes ENABLE ROW LEVEL SECURITY;
ALTER TABLE fair_group_passes FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY %I ON %I TO %I USING (%s) WITH CHECK (%s)',
                   'fair_group_passes_runtime', 'fair_group_passes', v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY %I ON %I TO %I USING (true) WITH CHECK (true)',
                   'fair_group_passes_system', 'fair_group_passes', v_sys);
    EXECUTE format('GRANT SELECT ON %I TO %I', 'fair_group_passes', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', 'fair_group_passes', v_sys);
END
$$;
