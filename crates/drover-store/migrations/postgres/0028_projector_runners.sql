-- drover 0028: which projectors are alive, for the retention of removed
-- projectors' checkpoints and the event purge's pin.
--
-- A runner records its projector here every few seconds (seen_at, the
-- database clock). The event retention step deletes the checkpoints of a
-- projector no runner has recorded for the retention (at least a day), so a
-- projector taken out of the code stops pinning the log. Projectors that
-- already have checkpoints start as seen now, so none is forgotten before
-- its runners have had a retention to record themselves.
--
-- The table holds no tenant data: it belongs to the nil tenant, like
-- event_slots, with RLS ENABLEd and FORCEd; only the system role (the
-- runner's record, the retention, the purge's pin) reads or writes it.

CREATE TABLE projector_runners (
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    projector text        PRIMARY KEY CONSTRAINT projector_runners_name_valid
                          CHECK (projector ~ '^[a-z0-9_.:-]{1,128}$'),
    seen_at   timestamptz NOT NULL DEFAULT now()
);

INSERT INTO projector_runners (projector)
SELECT DISTINCT projector FROM projector_checkpoints;

ALTER TABLE projector_runners ENABLE ROW LEVEL SECURITY;
ALTER TABLE projector_runners FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_sys text;
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY projector_runners_system ON projector_runners TO %I '
                   'USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON projector_runners TO %I', v_sys);
END
$$;
