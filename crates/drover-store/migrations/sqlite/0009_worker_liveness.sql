-- drover 0009 on SQLite: honest worker liveness.
--
-- A worker publishes its beat interval with every beat, so a reader can
-- tell a worker that stopped beating (reported as `lost` once no beat has
-- landed for two intervals by the store's clock) from one that is between
-- beats. `lost` is computed when the rows are read (worker_list.sql),
-- never stored. Rows written before this migration get the default beat
-- interval (5 s).
ALTER TABLE workers
    ADD COLUMN beat_interval_ms INTEGER NOT NULL DEFAULT 5000 CHECK (beat_interval_ms > 0);
