-- drover 0033 on SQLite: concurrency limits, as on PostgreSQL (one row per
-- scope and source; the operator's wins until cleared). The claim runs on
-- the single writer, so admission and the count it reads are one step.

CREATE TABLE flow_limits (
    scope       TEXT    NOT NULL CHECK (scope IN ('lane', 'kind', 'group')),
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128
                                        AND name NOT GLOB '*[^a-z0-9_.:-]*'),
    source      TEXT    NOT NULL CHECK (source IN ('code', 'operator')),
    concurrency INTEGER NOT NULL CHECK (concurrency BETWEEN 1 AND 100000),
    set_at      INTEGER NOT NULL,
    set_by      BLOB    NOT NULL CHECK (length(set_by) = 16),
    PRIMARY KEY (scope, name, source)
) STRICT;
