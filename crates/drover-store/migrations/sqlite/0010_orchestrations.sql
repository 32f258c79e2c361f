-- drover 0010 on SQLite: orchestration records and their signals.
-- Conventions as in 0001 (UUID BLOBs, INTEGER microseconds, STRICT). The
-- JSON columns (state, completed, history, result, payload) are TEXT
-- checked with json_valid.

CREATE TABLE orchestrations (
    id               BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    tenant_id        BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    kind             TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128
                                             AND kind NOT GLOB '*[^a-z0-9_.:-]*'),
    lane             TEXT    NOT NULL CHECK (length(lane) BETWEEN 1 AND 64),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    status           TEXT    NOT NULL CHECK (status IN ('running', 'parked', 'stuck', 'completed',
                                             'compensating', 'compensated', 'compensation_failed', 'cancelled')),
    step             TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (json_valid(state)),
    version          INTEGER NOT NULL CHECK (version >= 1),
    parked_until     INTEGER,
    waiting_for      TEXT,
    timeout_step     TEXT,
    completed        TEXT    NOT NULL CHECK (json_valid(completed)),
    history          TEXT    NOT NULL CHECK (json_valid(history)),
    result           TEXT    CHECK (result IS NULL OR json_valid(result)),
    error            TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    resume_as        TEXT,
    idempotency_key  TEXT    CHECK (idempotency_key IS NULL
                                    OR length(CAST(idempotency_key AS BLOB)) BETWEEN 1 AND 512),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- A parked record waits for a time (and maybe a signal); no other does.
    CHECK (status <> 'parked' OR parked_until IS NOT NULL),
    CHECK (status = 'parked' OR (parked_until IS NULL AND waiting_for IS NULL))
) STRICT;

CREATE UNIQUE INDEX orchestrations_tenant_key ON orchestrations (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The sweep's resume: parked records by park time.
CREATE INDEX orchestrations_parked ON orchestrations (parked_until) WHERE status = 'parked';
CREATE INDEX orchestrations_tenant_created ON orchestrations (tenant_id, created_at);

CREATE TABLE orchestration_signals (
    id               BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    tenant_id        BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    orchestration_id BLOB    NOT NULL REFERENCES orchestrations (id) ON DELETE CASCADE,
    name             TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    idempotency_key  TEXT    CHECK (idempotency_key IS NULL
                                    OR length(CAST(idempotency_key AS BLOB)) BETWEEN 1 AND 512),
    consumed_at      INTEGER,
    created_at       INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX orchestration_signals_key
    ON orchestration_signals (tenant_id, orchestration_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX orchestration_signals_pending
    ON orchestration_signals (tenant_id, orchestration_id, name, created_at)
    WHERE consumed_at IS NULL;
