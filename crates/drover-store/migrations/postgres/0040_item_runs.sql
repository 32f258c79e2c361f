-- drover 0040: each item's recent runs (the attempt history the item page
-- and GET /v1/items/{id} show).
--
-- A run is one claim, from its start to the write that ended it. It is
-- written by a trigger on the transition out of `claimed`, in the statement
-- that ends the claim (complete, the batched completion, fail, defer,
-- release, the handler's cancel, the operator's cancel, the sweep's
-- requeue of a passed lease, the orphan failure): no statement and no
-- round trip is added to the hot path, and no path can forget it.
--
-- What the trigger reads (the classification is RunOutcome::classify's
-- twin in crates/drover-store/src/runs.rs):
--   started_at  the claim's start: a claimed row's updated_at (a lease
--               renewal does not touch it, from this migration on)
--   finished_at the ending write's updated_at
--   outcome     lease_lost when the lease had passed at the ending write
--               (every fenced write requires it ahead; only the sweep, the
--               orphan failure and the operator's cancel pass a passed
--               one), else done / cancelled / failed (dead-lettered) by the
--               new status, retry when an attempt was spent, snoozed when
--               it is available later, released when at once
--   error       the new last_error for a retry, failure or lost lease; for
--               a release or cancellation only when the write changed it
--               (a note), else none
--
-- Bounded per item: the row's slot is claim_seq mod 20 (RUNS_KEPT), so an
-- item keeps its last 20 runs and a run overwrites the one 20 claims
-- before it; no delete runs on the hot path. Purged by retention: the
-- item purge deletes runs that finished before its cutoff (a purged item's
-- runs all did, since its last update is before the cutoff).
--
-- Tenant-scoped like every table: the trigger runs as the role of the
-- statement that fired it (the runtime role for the tenant, or the system
-- role), under the policies below.

CREATE TABLE item_runs (
    tenant_id   uuid        NOT NULL,
    item_id     uuid        NOT NULL,
    slot        smallint    NOT NULL CONSTRAINT item_runs_slot CHECK (slot BETWEEN 0 AND 19),
    claim_seq   bigint      NOT NULL,
    worker      text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text        NOT NULL CONSTRAINT item_runs_outcome CHECK (outcome IN
                    ('done', 'retry', 'failed', 'cancelled', 'snoozed', 'released', 'lease_lost')),
    error       text,
    PRIMARY KEY (item_id, slot)
);

-- The purge's range.
CREATE INDEX item_runs_finished ON item_runs (finished_at);

ALTER TABLE item_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_runs FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY item_runs_runtime ON item_runs TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_runs_system ON item_runs TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON item_runs TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON item_runs TO %I', v_sys);
END
$$;

CREATE FUNCTION item_runs_end() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO item_runs AS r (tenant_id, item_id, slot, claim_seq, worker, started_at,
                                finished_at, outcome, error)
    VALUES (
        NEW.tenant_id, NEW.id, (OLD.claim_seq % 20)::smallint, OLD.claim_seq, OLD.claimed_by,
        OLD.updated_at, NEW.updated_at,
        CASE
            WHEN OLD.lease_expires_at <= NEW.updated_at THEN 'lease_lost'
            WHEN NEW.status = 'done' THEN 'done'
            WHEN NEW.status = 'cancelled' THEN 'cancelled'
            WHEN NEW.status = 'failed' THEN 'failed'
            WHEN NEW.attempts > OLD.attempts THEN 'retry'
            WHEN NEW.available_at > NEW.updated_at THEN 'snoozed'
            ELSE 'released'
        END,
        CASE
            WHEN OLD.lease_expires_at <= NEW.updated_at OR NEW.status = 'failed'
                 OR NEW.attempts > OLD.attempts THEN NEW.last_error
            WHEN NEW.status = 'done' THEN NULL
            WHEN NEW.last_error IS DISTINCT FROM OLD.last_error THEN NEW.last_error
        END)
    ON CONFLICT (item_id, slot) DO UPDATE
    SET tenant_id = EXCLUDED.tenant_id, claim_seq = EXCLUDED.claim_seq,
        worker = EXCLUDED.worker, started_at = EXCLUDED.started_at,
        finished_at = EXCLUDED.finished_at, outcome = EXCLUDED.outcome, error = EXCLUDED.error;
    RETURN NULL;
END $$;

-- Not for a first claim that ends done (claim_seq 1): that run is the
-- item itself (done, one run, finished at its updated_at), and writing a
-- row for it cost every completion of the common case a second write (the
-- drain at 0.64 of the build before, in drover bench on PostgreSQL).
CREATE TRIGGER item_runs_end AFTER UPDATE OF status ON items
    FOR EACH ROW WHEN (OLD.status = 'claimed' AND NEW.status <> 'claimed'
                       AND (NEW.status <> 'done' OR OLD.claim_seq > 1))
    EXECUTE FUNCTION item_runs_end();
