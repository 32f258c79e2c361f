-- drover 0011 on SQLite: the transactional outbox. Conventions as in 0001
-- (UUID BLOBs, INTEGER microseconds, STRICT). SQLite updates in place and
-- reuses freed pages without a vacuum, so one table serves (no ring; see
-- docs/design.md): the purge deletes done rows past retention in batches.

CREATE TABLE outbox (
    id               BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    tenant_id        BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    kind             TEXT    NOT NULL CHECK ((kind GLOB 'work.?*' OR kind GLOB 'event.?*')
                                             AND length(kind) <= 134
                                             AND kind NOT GLOB '*[^a-z0-9_.:-]*'),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    actor            BLOB    NOT NULL CHECK (length(actor) = 16),
    request_id       TEXT,
    traceparent      TEXT,
    created_at       INTEGER NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending'
                             CHECK (status IN ('pending', 'done', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    available_at     INTEGER NOT NULL,
    last_error       TEXT,
    claim_token      BLOB,
    lease_expires_at INTEGER,
    relayed_at       INTEGER,
    CHECK ((claim_token IS NULL) = (lease_expires_at IS NULL)),
    CHECK (status = 'pending' OR claim_token IS NULL),
    CHECK ((status = 'done') = (relayed_at IS NOT NULL))
) STRICT;

CREATE INDEX outbox_pending ON outbox (created_at) WHERE status = 'pending';
CREATE INDEX outbox_failed ON outbox (created_at) WHERE status = 'failed';
CREATE INDEX outbox_done ON outbox (relayed_at) WHERE status = 'done';
CREATE INDEX outbox_tenant_created ON outbox (tenant_id, created_at);
