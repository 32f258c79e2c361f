-- drover 0008: the periodic schedules' state, one row per schedule.
--
-- A schedule is declared in code once for the whole fleet, not per tenant,
-- and its items are enqueued as the system principal into the nil tenant;
-- so every row belongs to the nil tenant. The table still carries tenant_id
-- and row-level security like every table: the scheduler runs under the
-- runtime role scoped to the nil tenant (the tenant of the items it inserts
-- in the same transaction), and no other tenant can see or move a schedule.

CREATE TABLE schedules (
    tenant_id    uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    -- [a-z0-9_.-]{1,64}: no ':', so periodic:<name>:<tick> parses back.
    name         text        NOT NULL CONSTRAINT schedules_name_rule CHECK (
                                 length(name) BETWEEN 1 AND 64
                                 AND translate(name, 'abcdefghijklmnopqrstuvwxyz0123456789_.-', '') = ''),
    cron         text        NOT NULL CONSTRAINT schedules_cron_bounded CHECK (length(cron) BETWEEN 1 AND 256),
    zone         text        NOT NULL CONSTRAINT schedules_zone_bounded CHECK (length(zone) BETWEEN 1 AND 64),
    kind         text        NOT NULL,
    lane         text        NOT NULL,
    misfire      text        NOT NULL CONSTRAINT schedules_misfire_known CHECK (misfire IN ('skip', 'once', 'all')),
    max_backfill integer     NOT NULL DEFAULT 0 CONSTRAINT schedules_backfill_nonneg CHECK (max_backfill >= 0),
    -- The last tick enqueued; NULL until the first. Only ever moves forward.
    last_tick    timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    seen_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

ALTER TABLE schedules ENABLE ROW LEVEL SECURITY;
ALTER TABLE schedules FORCE ROW LEVEL SECURITY;

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
    EXECUTE format('CREATE POLICY schedules_runtime ON schedules TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY schedules_system ON schedules TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON schedules TO %I, %I', v_rt, v_sys);
END
$$;
