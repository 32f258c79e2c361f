-- drover on SQLite 0008: the periodic schedules' state, one row per
-- schedule. Every row belongs to the nil tenant (a schedule is declared in
-- code for the whole installation; its items go to the nil tenant), and
-- every statement still names the tenant, as on every table.

CREATE TABLE schedules (
    tenant_id    BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 64
                                         AND name NOT GLOB '*[^a-z0-9_.-]*'),
    cron         TEXT    NOT NULL CHECK (length(cron) BETWEEN 1 AND 256),
    zone         TEXT    NOT NULL CHECK (length(zone) BETWEEN 1 AND 64),
    kind         TEXT    NOT NULL,
    lane         TEXT    NOT NULL,
    misfire      TEXT    NOT NULL CHECK (misfire IN ('skip', 'once', 'all')),
    max_backfill INTEGER NOT NULL DEFAULT 0 CHECK (max_backfill >= 0),
    -- Microseconds; NULL until the first tick. Only ever moves forward.
    last_tick    INTEGER,
    created_at   INTEGER NOT NULL,
    seen_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT;
