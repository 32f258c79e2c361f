-- drover on SQLite 0015: the HTTP API's tokens (hashes only; a system
-- table, see access/mod.rs for why it has no owning tenant) and its
-- idempotency markers (tenant-scoped: every statement names the tenant).
-- Times are microseconds.

CREATE TABLE api_tokens (
    id           BLOB    PRIMARY KEY CHECK (length(id) = 16),
    hash         TEXT    NOT NULL UNIQUE CHECK (length(hash) = 64),
    role         TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    scope_tenant BLOB    CHECK (scope_tenant IS NULL OR length(scope_tenant) = 16),
    -- A JSON array of kind names or patterns.
    enqueue      TEXT    NOT NULL DEFAULT '[]',
    label        TEXT    NOT NULL DEFAULT '' CHECK (length(label) <= 256),
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
) STRICT;

CREATE TABLE idempotency_markers (
    tenant_id    BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    principal_id BLOB    NOT NULL CHECK (length(principal_id) = 16),
    route        TEXT    NOT NULL CHECK (length(route) BETWEEN 1 AND 256),
    key          TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint  TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('in_flight', 'done')),
    status       INTEGER CHECK (status BETWEEN 100 AND 599),
    body         TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    CHECK (state <> 'done' OR (status IS NOT NULL AND body IS NOT NULL)),
    PRIMARY KEY (tenant_id, principal_id, route, key)
) STRICT;

CREATE INDEX idempotency_markers_expires ON idempotency_markers (expires_at);
