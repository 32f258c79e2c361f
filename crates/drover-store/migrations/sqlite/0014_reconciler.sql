-- drover 0014 on SQLite: the sync reconciler's checkpoints and records, and
-- an index for the sweep's search of live orchestrations whose step item
-- was dead-lettered. Conventions as in 0001 (UUID BLOBs, INTEGER
-- microseconds, STRICT, JSON as TEXT checked with json_valid).

CREATE TABLE sync_checkpoints (
    tenant_id   BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    reconciler  TEXT    NOT NULL CHECK (length(reconciler) BETWEEN 1 AND 128
                                        AND reconciler NOT GLOB '*[^a-z0-9_.:-]*'),
    cursor      TEXT    NOT NULL CHECK (length(CAST(cursor AS BLOB)) BETWEEN 1 AND 4096),
    version     INTEGER NOT NULL CHECK (version >= 1),
    applied     INTEGER NOT NULL DEFAULT 0 CHECK (applied >= 0),
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, reconciler)
) STRICT;

CREATE TABLE sync_records (
    tenant_id      BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    reconciler     TEXT    NOT NULL,
    key            TEXT    NOT NULL CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 512),
    data           TEXT    NOT NULL CHECK (json_valid(data)),
    version        INTEGER NOT NULL,
    source_version INTEGER,
    dirty          INTEGER NOT NULL DEFAULT 0 CHECK (dirty IN (0, 1)),
    review         TEXT    CHECK (review IS NULL OR json_valid(review)),
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, reconciler, key)
) STRICT;

CREATE INDEX sync_records_in_review ON sync_records (tenant_id, reconciler, key)
    WHERE review IS NOT NULL;

CREATE INDEX orchestrations_live ON orchestrations (updated_at)
    WHERE status IN ('running', 'compensating');
