-- drover 0043 on SQLite: rate limits, as on PostgreSQL (one setting per
-- scope and source, the operator's winning until cleared; one cell per
-- scope key with its theoretical arrival time, in microseconds). The
-- claim runs on the single writer, so reading, admitting and writing the
-- cells with the claim are one step.

CREATE TABLE rate_limits (
    scope     TEXT    NOT NULL CHECK (scope IN ('lane', 'kind', 'group')),
    name      TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128
                                      AND name NOT GLOB '*[^a-z0-9_.:-]*'),
    source    TEXT    NOT NULL CHECK (source IN ('code', 'operator')),
    count     INTEGER NOT NULL CHECK (count BETWEEN 1 AND 1000000),
    period_ms INTEGER NOT NULL CHECK (period_ms BETWEEN 1 AND 604800000),
    burst     INTEGER NOT NULL CHECK (burst BETWEEN 1 AND 1000000),
    set_at    INTEGER NOT NULL,
    set_by    BLOB    NOT NULL CHECK (length(set_by) = 16),
    PRIMARY KEY (scope, name, source)
) STRICT;

CREATE TABLE rate_cells (
    key TEXT    NOT NULL PRIMARY KEY,
    tat INTEGER NOT NULL
) STRICT;
