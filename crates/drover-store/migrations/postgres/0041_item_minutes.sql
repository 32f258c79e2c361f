-- drover 0041: the dashboard's history, and the worker's version.
--
-- item_minutes holds, per minute, tenant, lane and kind, the items that
-- became done or failed in that minute and how long the done ones took
-- from available to done (the last run's wait in the queue plus its run).
-- The sweep writes it in the settlement of the count rollup (migration
-- 0020), from the same range of final rows it folds into item_counts, so
-- the hot path writes nothing more and a restart of the server blanks no
-- chart. Rows older than two days are deleted by the same settlement (a
-- range of the primary key, whose leading column is the minute); a read
-- of the last hour or day is a range of it too.
CREATE TABLE item_minutes (
    minute         timestamptz NOT NULL,
    tenant_id      uuid        NOT NULL,
    lane           text        NOT NULL,
    kind           text        NOT NULL,
    done           bigint      NOT NULL,
    failed         bigint      NOT NULL,
    latency_ms_sum bigint      NOT NULL,
    latency_ms_max bigint      NOT NULL,
    PRIMARY KEY (minute, tenant_id, lane, kind)
);

ALTER TABLE item_minutes ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_minutes FORCE ROW LEVEL SECURITY;

-- The version of drover a worker runs, on its liveness row; '' for a row
-- beaten by an older worker. Beaten with the row, so it costs the
-- heartbeat one short text.
ALTER TABLE workers ADD COLUMN version text NOT NULL DEFAULT '';

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY item_minutes_runtime ON item_minutes TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_minutes_system ON item_minutes TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT ON item_minutes TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON item_minutes TO %I', v_sys);
END
$$;
