-- drover on SQLite 0018: lane states, so an operator can pause and resume
-- a lane. A lane is shared by every tenant's items, so its state is
-- installation-wide: every row belongs to the nil tenant, and every
-- statement still names the tenant, as on every table. A lane with no row
-- runs.

CREATE TABLE lane_states (
    tenant_id  BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    lane       TEXT    NOT NULL CHECK (length(lane) BETWEEN 1 AND 64
                                       AND lane NOT GLOB '*[^a-z0-9_-]*'),
    paused     INTEGER NOT NULL CHECK (paused IN (0, 1)),
    -- Microseconds.
    changed_at INTEGER NOT NULL,
    changed_by BLOB    NOT NULL CHECK (length(changed_by) = 16),
    PRIMARY KEY (tenant_id, lane)
) STRICT;
