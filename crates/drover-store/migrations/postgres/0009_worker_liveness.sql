-- drover 0009: honest worker liveness.
--
-- A worker publishes its beat interval with every beat, so a reader can
-- tell a worker that stopped beating (a crash, a SIGKILL, a lost host:
-- reported as `lost` once no beat has landed for two intervals by the
-- database clock) from one that is between beats. The state column keeps
-- what the worker itself said (running, draining, offline); `lost` is
-- computed when the rows are read (worker_list.sql), never stored, so a
-- worker that comes back is `running` again with its next beat.
--
-- Rows written before this migration get the default beat interval (5 s).
ALTER TABLE workers
    ADD COLUMN beat_interval_ms integer NOT NULL DEFAULT 5000
        CONSTRAINT workers_beat_interval_positive CHECK (beat_interval_ms > 0);
