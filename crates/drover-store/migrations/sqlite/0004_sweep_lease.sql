-- drover 0004: the sweep lease, a row instead of a process-local flag.
--
-- One sweeper at a time across every process sharing the file, and a
-- stalled holder (paused, hung) loses the right when its lease passes: a
-- lease is a time on the store's clock, not a session that lives as long as
-- its holder. The one row exists from the start, so taking the lease is a
-- single conditional UPDATE.
CREATE TABLE sweep_lease (
    name         TEXT    NOT NULL PRIMARY KEY CHECK (name = 'sweep'),
    -- The current holder's token and name; NULL while nobody holds it.
    token        BLOB    CHECK (token IS NULL OR length(token) = 16),
    holder       TEXT,
    -- The lease runs until this instant (microseconds); passed means free.
    expires_at   INTEGER NOT NULL,
    -- When the last completed sweep pass ended (microseconds).
    last_pass_at INTEGER,
    CHECK ((token IS NULL) = (holder IS NULL))
) STRICT;

INSERT INTO sweep_lease (name, expires_at) VALUES ('sweep', 0);
