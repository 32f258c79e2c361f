-- drover 0012 on SQLite: the event log and the projectors' checkpoints.
-- Conventions as in 0001 (UUID BLOBs, INTEGER microseconds, STRICT).
--
-- Every write runs under the one writer's BEGIN IMMEDIATE, so an append
-- takes the next position of its tenant only after every earlier write
-- committed: positions are dense and in commit order. event_heads keeps the
-- newest position even when the purge has removed every event of a tenant,
-- so a position is never handed out twice.

CREATE TABLE event_heads (
    tenant_id  BLOB    NOT NULL PRIMARY KEY CHECK (length(tenant_id) = 16),
    head       INTEGER NOT NULL DEFAULT 0 CHECK (head >= 0),
    head_at    INTEGER
) STRICT;

CREATE TABLE events (
    tenant_id   BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    position    INTEGER NOT NULL CHECK (position >= 1),
    id          BLOB    NOT NULL CHECK (length(id) = 16),
    topic       TEXT    NOT NULL CHECK (length(topic) BETWEEN 1 AND 128
                                        AND topic NOT GLOB '*[^a-z0-9_.:-]*'),
    payload     TEXT    NOT NULL CHECK (json_valid(payload)),
    actor       BLOB    NOT NULL CHECK (length(actor) = 16),
    request_id  TEXT,
    traceparent TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, position)
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX events_tenant_id ON events (tenant_id, id);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE projector_checkpoints (
    tenant_id         BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    projector         TEXT    NOT NULL CHECK (length(projector) BETWEEN 1 AND 128
                                              AND projector NOT GLOB '*[^a-z0-9_.:-]*'),
    position          INTEGER NOT NULL DEFAULT 0 CHECK (position >= 0),
    lease_token       BLOB,
    lease_holder      TEXT,
    lease_expires_at  INTEGER,
    rebuild_requested INTEGER NOT NULL DEFAULT 0 CHECK (rebuild_requested IN (0, 1)),
    rebuilds          INTEGER NOT NULL DEFAULT 0,
    applied_at        INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, projector)
) STRICT;
