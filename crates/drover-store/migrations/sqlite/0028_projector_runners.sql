-- drover 0028 on SQLite: which projectors are alive, for the retention of
-- removed projectors' checkpoints and the event purge's pin.
--
-- A runner records its projector here every few seconds (seen_at, INTEGER
-- microseconds on the store's clock). The event retention step deletes the
-- checkpoints of a projector no runner has recorded for the retention (at
-- least a day), so a projector taken out of the code stops pinning the log.
-- Projectors that already have checkpoints start as seen now, so none is
-- forgotten before its runners have had a retention to record themselves.

CREATE TABLE projector_runners (
    projector TEXT    NOT NULL PRIMARY KEY CHECK (length(projector) BETWEEN 1 AND 128
                                                  AND projector NOT GLOB '*[^a-z0-9_.:-]*'),
    seen_at   INTEGER NOT NULL
) STRICT;

INSERT INTO projector_runners (projector, seen_at)
SELECT DISTINCT projector, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM projector_checkpoints;
