-- drover 0018: lane states, so an operator can pause and resume a lane.
--
-- A lane is shared by every tenant's items and drained by workers that
-- claim across tenants, so its state is installation-wide: every row
-- belongs to the nil tenant. The table still carries tenant_id and
-- row-level security like every table. The store reads and writes it under
-- the system role (as it does the workers table); a runtime-role session
-- sees only its own tenant's rows, which for any real tenant is none.
-- A lane with no row runs; the row stays after a resume, recording who
-- resumed it and when.

CREATE TABLE lane_states (
    tenant_id  uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    lane       text        NOT NULL CONSTRAINT lane_states_lane_rule CHECK (
                               length(lane) BETWEEN 1 AND 64
                               AND translate(lane, 'abcdefghijklmnopqrstuvwxyz0123456789_-', '') = ''),
    paused     boolean     NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    changed_by uuid        NOT NULL,
    PRIMARY KEY (tenant_id, lane)
);

ALTER TABLE lane_states ENABLE ROW LEVEL SECURITY;
ALTER TABLE lane_states FORCE ROW LEVEL SECURITY;

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
    EXECUTE format('CREATE POLICY lane_states_runtime ON lane_states TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY lane_states_system ON lane_states TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON lane_states TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON lane_states TO %I', v_sys);
END
$$;
