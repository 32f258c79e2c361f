-- drover 0041 on SQLite: the dashboard's history, and the worker's version
-- (see the PostgreSQL migration). Minutes are microseconds since the epoch,
-- rounded down to the minute, like every time here.
CREATE TABLE item_minutes (
    minute         INTEGER NOT NULL,
    tenant_id      BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    lane           TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    done           INTEGER NOT NULL,
    failed         INTEGER NOT NULL,
    latency_ms_sum INTEGER NOT NULL,
    latency_ms_max INTEGER NOT NULL,
    PRIMARY KEY (minute, tenant_id, lane, kind)
) STRICT, WITHOUT ROWID;

ALTER TABLE workers ADD COLUMN version TEXT NOT NULL DEFAULT '';
