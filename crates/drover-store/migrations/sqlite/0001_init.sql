-- drover on SQLite: the work items, their audit trail and the workers'
-- liveness rows.
--
-- Conventions (kept by every statement in sql/sqlite/):
-- * UUIDs are 16-byte BLOBs (sqlx's native SQLite encoding of `Uuid`).
-- * Instants are INTEGER microseconds since the Unix epoch, read from the
--   store's Rust-side clock and bound as parameters: SQLite has no shared
--   clock we can trust, and integers compare and sort fast.
-- * Tables are STRICT so a wrongly typed bind fails loudly instead of being
--   stored under SQLite's type affinity.
-- * There is no row-level security: tenant isolation is the
--   `tenant_id = ?` in every per-tenant statement.

CREATE TABLE items (
    id               BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    tenant_id        BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    kind             TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128
                                             AND kind NOT GLOB '*[^a-z0-9_.:-]*'),
    lane             TEXT    NOT NULL CHECK (length(lane) BETWEEN 1 AND 64
                                             AND lane NOT GLOB '*[^a-z0-9_-]*'),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    priority         INTEGER NOT NULL CHECK (priority BETWEEN -32768 AND 32767),
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'claimed', 'done', 'failed', 'cancelled')),
    available_at     INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    claimed_by       TEXT,
    claim_token      BLOB    CHECK (claim_token IS NULL OR length(claim_token) = 16),
    claim_seq        INTEGER NOT NULL DEFAULT 0 CHECK (claim_seq >= 0),
    lease_expires_at INTEGER,
    last_error       TEXT    CHECK (last_error IS NULL OR length(CAST(last_error AS BLOB)) <= 2048),
    idempotency_key  TEXT    CHECK (idempotency_key IS NULL
                                    OR length(CAST(idempotency_key AS BLOB)) BETWEEN 1 AND 512),
    created_by       BLOB    NOT NULL CHECK (length(created_by) = 16),
    request_id       TEXT    CHECK (request_id IS NULL OR length(CAST(request_id AS BLOB)) <= 256),
    traceparent      TEXT    CHECK (traceparent IS NULL OR length(CAST(traceparent AS BLOB)) <= 256),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    updated_by       BLOB    NOT NULL CHECK (length(updated_by) = 16),
    -- A claimed item carries its whole claim; no other status carries any of it.
    CHECK (status <> 'claimed'
           OR (claim_token IS NOT NULL AND claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (status = 'claimed'
           OR (claim_token IS NULL AND claimed_by IS NULL AND lease_expires_at IS NULL))
) STRICT;

-- The claim: pending items of a lane in priority, then available_at order.
CREATE INDEX items_pending ON items (lane, priority, available_at) WHERE status = 'pending';
-- The sweep: claimed items per tenant by lease expiry. The claimed set is
-- small (bounded by the workers' capacity), so the cross-tenant scan for
-- stale tenants reads this partial index whole and stays cheap.
CREATE INDEX items_claimed_lease ON items (tenant_id, lease_expires_at) WHERE status = 'claimed';
-- Deduplication: one key per tenant while the row exists. Partial, since
-- NULL keys never collide: keyless items (most of them) cost no entry here.
CREATE UNIQUE INDEX items_tenant_key ON items (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Per-tenant reads (listings newest first).
CREATE INDEX items_tenant_created ON items (tenant_id, created_at);
-- The purge: final items by last update.
CREATE INDEX items_final_updated ON items (updated_at)
    WHERE status IN ('done', 'failed', 'cancelled');

-- Dead letters and operator actions. No foreign key to items: the trail
-- outlives the purge of the item it names.
CREATE TABLE audit (
    seq       INTEGER NOT NULL PRIMARY KEY,
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    item_id   BLOB    NOT NULL CHECK (length(item_id) = 16),
    action    TEXT    NOT NULL CHECK (action IN ('dead_letter', 'cancel', 'retry')),
    actor     BLOB    NOT NULL CHECK (length(actor) = 16),
    detail    TEXT,
    at        INTEGER NOT NULL
) STRICT;

CREATE INDEX audit_tenant_item ON audit (tenant_id, item_id, seq);

-- Worker liveness, published best effort by each worker's heartbeat.
CREATE TABLE workers (
    id           TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 256),
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    lanes        TEXT    NOT NULL CHECK (json_valid(lanes) AND json_type(lanes) = 'array'),
    capacity     INTEGER NOT NULL CHECK (capacity >= 0),
    started_at   INTEGER NOT NULL,
    last_beat_at INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('running', 'draining', 'offline'))
) STRICT;

CREATE INDEX workers_last_beat ON workers (last_beat_at);
