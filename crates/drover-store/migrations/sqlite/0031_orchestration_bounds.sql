-- drover 0031 on SQLite: the bounds of orchestration records, as on
-- PostgreSQL: the count of dropped history entries, and the indexes the
-- retention purge of finished records and consumed signals reads.

ALTER TABLE orchestrations
    ADD COLUMN history_dropped INTEGER NOT NULL DEFAULT 0 CHECK (history_dropped >= 0);

CREATE INDEX orchestrations_finished ON orchestrations (updated_at)
    WHERE status IN ('completed', 'compensated', 'compensation_failed', 'cancelled');
CREATE INDEX orchestration_signals_consumed ON orchestration_signals (consumed_at)
    WHERE consumed_at IS NOT NULL;
