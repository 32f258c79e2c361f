-- drover 0049 on SQLite: the queue wait over time (see the PostgreSQL
-- migration). System-wide: per minute and lane, every tenant's items
-- together. Minutes are microseconds since the epoch, rounded down to the
-- minute, like every time here.
CREATE TABLE queue_waits (
    minute    INTEGER NOT NULL,
    lane      TEXT    NOT NULL,
    oldest_ms INTEGER NOT NULL,
    PRIMARY KEY (minute, lane)
) STRICT, WITHOUT ROWID;
