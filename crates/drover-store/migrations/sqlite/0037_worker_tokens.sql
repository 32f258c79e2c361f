-- drover on SQLite 0037: worker tokens, for workers over HTTP (see the
-- PostgreSQL migration for the grants' form). SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt with the new role and the `work`
-- column (a JSON array of `<lane>:<kind>` grants), rows copied as they are.
CREATE TABLE api_tokens_0037 (
    id           BLOB    PRIMARY KEY CHECK (length(id) = 16),
    hash         TEXT    NOT NULL UNIQUE CHECK (length(hash) = 64),
    role         TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'worker')),
    scope_tenant BLOB    CHECK (scope_tenant IS NULL OR length(scope_tenant) = 16),
    -- A JSON array of kind names or patterns.
    enqueue      TEXT    NOT NULL DEFAULT '[]',
    label        TEXT    NOT NULL DEFAULT '' CHECK (length(label) <= 256),
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    -- A JSON array of `<lane>:<kind>` grants; only a worker token holds any.
    work         TEXT    NOT NULL DEFAULT '[]',
    CHECK (role = 'worker' OR work = '[]')
) STRICT;

INSERT INTO api_tokens_0037 (id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at)
SELECT id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at FROM api_tokens;

DROP TABLE api_tokens;
ALTER TABLE api_tokens_0037 RENAME TO api_tokens;
