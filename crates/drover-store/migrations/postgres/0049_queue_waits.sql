-- drover 0049: the queue wait over time, for the dashboard's chart.
--
-- queue_waits holds, per minute and lane, the age in milliseconds of the
-- lane's oldest item that was pending and due (available) when the sweep
-- read its gauges: the largest of that minute's passes. The sweep reads
-- that age for its gauges already; recording it is one small upsert per
-- pass, and the claim and complete paths write nothing more. The same
-- call deletes minutes older than 25 hours (the day chart's window), a
-- range of the primary key, whose leading column is the minute.
--
-- System-wide: a lane is shared by every tenant's items and drained by
-- workers that claim across tenants, so its wait is installation-wide and
-- every row belongs to the nil tenant (as lane_states, migration 0018).
-- The table still carries tenant_id and row-level security like every
-- table; the store reads and writes it under the system role, and a
-- runtime-role session sees only its own tenant's rows, which for any real
-- tenant is none. The dashboard shows the chart only to a token not scoped
-- to a tenant.
CREATE TABLE queue_waits (
    minute    timestamptz NOT NULL,
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    lane      text        NOT NULL,
    oldest_ms bigint      NOT NULL,
    PRIMARY KEY (minute, tenant_id, lane)
);

ALTER TABLE queue_waits ENABLE ROW LEVEL SECURITY;
ALTER TABLE queue_waits FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY queue_waits_runtime ON queue_waits TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY queue_waits_system ON queue_waits TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON queue_waits TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON queue_waits TO %I', v_sys);
END
$$;
