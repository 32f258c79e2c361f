-- drover 0004: the sweep lease, a row on the database clock instead of a
-- session advisory lock.
--
-- An advisory lock lives as long as its session: a sweeper that hung in a
-- step or was paused (SIGSTOP, a frozen VM) kept it, and its connection,
-- for good, so no worker anywhere requeued lease-expired items again. A
-- lease is a time: a stalled holder loses it when it passes, any worker
-- may take it then, and every renewal and release is fenced on the
-- holder's token. The one row exists from the start, so taking the lease
-- is a single conditional UPDATE (no insert race).
CREATE TABLE sweep_lease (
    name         text        PRIMARY KEY CONSTRAINT sweep_lease_one CHECK (name = 'sweep'),
    -- The lease belongs to the installation, not to a tenant: like the
    -- workers table, its row is the nil tenant's.
    tenant_id    uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    token        uuid,
    holder       text,
    taken_at     timestamptz,
    expires_at   timestamptz NOT NULL,
    last_pass_at timestamptz,
    CONSTRAINT sweep_lease_holder CHECK ((token IS NULL) = (holder IS NULL))
);

INSERT INTO sweep_lease (name, expires_at) VALUES ('sweep', '-infinity');

-- Row-level security as on every table. Only the system role (the sweep is
-- a documented cross-tenant operation) may read or change the lease; the
-- runtime role has no grant on it at all.
ALTER TABLE sweep_lease ENABLE ROW LEVEL SECURITY;
ALTER TABLE sweep_lease FORCE ROW LEVEL SECURITY;
CREATE POLICY sweep_lease_system ON sweep_lease TO drover_system USING (true) WITH CHECK (true);
GRANT SELECT, UPDATE ON sweep_lease TO drover_system;
