-- drover 0020: counts without a GROUP BY over the whole items table, and a
-- dead-letter list that walks an index of its own.
--
-- Final rows (done, failed, cancelled) are most of the table and never
-- change status again except by an operator's retry or the purge. The
-- sweep folds them into item_counts once they are settled: updated before
-- item_counts_mark.settled_to, a time no transaction still open can write
-- under (now() is a transaction's start, and the mark never passes the
-- oldest open transaction's start). A count reads the rollup, plus the
-- final rows not settled yet (an index range of items_final), plus the
-- pending and claimed rows (their own partial indexes), in one snapshot,
-- so it is exact. No write of the hot path touches these tables: the
-- claim and the completion cost what they did.
--
-- A retry takes a row out of a final status. The runtime role cannot
-- serialize with the sweep (the mark is not its tenant's row), so it
-- writes a line to item_counts_unfinal instead; the next settlement
-- subtracts the lines whose row it had counted and drops the others (a
-- line the settlement can see was committed before it looked, so the
-- retried row was not counted as final then). The purge, a system-role
-- statement, subtracts the settled rows it deletes itself, holding the
-- mark FOR SHARE so no settlement runs between its read and its commit.

CREATE TABLE item_counts (
    tenant_id uuid   NOT NULL,
    lane      text   NOT NULL,
    kind      text   NOT NULL,
    status    text   NOT NULL CONSTRAINT item_counts_final CHECK (status IN ('done', 'failed', 'cancelled')),
    n         bigint NOT NULL,
    PRIMARY KEY (tenant_id, lane, kind, status)
);

-- One row, of the nil tenant: final rows updated before settled_to are in
-- item_counts.
CREATE TABLE item_counts_mark (
    tenant_id  uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000' PRIMARY KEY,
    settled_to timestamptz NOT NULL
);
-- The epoch: nothing is settled yet, and the first settlement folds in every
-- final row already in the table.
INSERT INTO item_counts_mark (settled_to) VALUES ('1970-01-01 00:00:00+00');

-- Rows a retry took out of a final status, until the next settlement
-- (which reads and deletes every line it can see: no key is needed).
CREATE TABLE item_counts_unfinal (
    tenant_id      uuid        NOT NULL,
    lane           text        NOT NULL,
    kind           text        NOT NULL,
    status         text        NOT NULL CONSTRAINT item_counts_unfinal_final CHECK (status IN ('done', 'failed', 'cancelled')),
    was_updated_at timestamptz NOT NULL
);

-- The dead letter and the cancelled list, newest first: failed and
-- cancelled rows are few and reach these statuses off the hot path (a
-- dead-lettering failure, a cancel), so only they pay for the entry.
-- Built in the migration's transaction: writes to items wait while it
-- reads the table (seconds at ten million rows).
CREATE INDEX items_stopped_list ON items (status, id) WHERE status IN ('failed', 'cancelled');

ALTER TABLE item_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_counts FORCE ROW LEVEL SECURITY;
ALTER TABLE item_counts_mark ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_counts_mark FORCE ROW LEVEL SECURITY;
ALTER TABLE item_counts_unfinal ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_counts_unfinal FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY item_counts_runtime ON item_counts TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_counts_system ON item_counts TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('CREATE POLICY item_counts_mark_runtime ON item_counts_mark TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_counts_mark_system ON item_counts_mark TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('CREATE POLICY item_counts_unfinal_runtime ON item_counts_unfinal TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_counts_unfinal_system ON item_counts_unfinal TO %I USING (true) WITH CHECK (true)', v_sys);
    -- The runtime role only records its tenant's retries.
    EXECUTE format('GRANT INSERT ON item_counts_unfinal TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON item_counts, item_counts_unfinal TO %I', v_sys);
    EXECUTE format('GRANT SELECT, UPDATE ON item_counts_mark TO %I', v_sys);
    -- The oldest start of a transaction open in this database. SECURITY
    -- DEFINER: pg_stat_activity shows xact_start only for sessions of the
    -- caller's own role (or to pg_read_all_stats), and drover's sessions
    -- log in as the owner, then switch roles.
    EXECUTE format(
        $f$CREATE FUNCTION drover_oldest_xact_start()
           RETURNS timestamptz
           LANGUAGE sql STABLE SECURITY DEFINER
           SET search_path = %I, pg_catalog
           AS 'SELECT min(xact_start) FROM pg_stat_activity
               WHERE datname = current_database() AND xact_start IS NOT NULL
                 AND pid <> pg_backend_pid()'$f$,
        current_schema());
    REVOKE ALL ON FUNCTION drover_oldest_xact_start() FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION drover_oldest_xact_start() TO %I', v_sys);
END
$$;
