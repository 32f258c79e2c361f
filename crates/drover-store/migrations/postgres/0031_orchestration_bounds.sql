-- drover 0031: the bounds of orchestration records. The history keeps its
-- newest entries and counts the dropped ones here; finished records and
-- consumed signals are purged by retention (system role, which holds
-- DELETE since 0010), found by the two partial indexes.

ALTER TABLE orchestrations
    ADD COLUMN history_dropped bigint NOT NULL DEFAULT 0 CHECK (history_dropped >= 0);

CREATE INDEX orchestrations_finished ON orchestrations (updated_at)
    WHERE status IN ('completed', 'compensated', 'compensation_failed', 'cancelled');
CREATE INDEX orchestration_signals_consumed ON orchestration_signals (consumed_at)
    WHERE consumed_at IS NOT NULL;
