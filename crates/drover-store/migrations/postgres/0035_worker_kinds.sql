-- drover 0035: the kinds a worker handles, on its liveness row.
--
-- A worker beats the kinds its registry holds (what its claims ask for),
-- so "why is it waiting" can tell an item whose lane has live workers but
-- none that runs its kind (`no_worker`, naming the kind) from one whose
-- lane has none at all. Rows beaten before this migration, and by a
-- worker of an older version, carry the empty list: read as "not
-- recorded", i.e. any kind, so no reason is given that the row cannot
-- back. The table's row-level security (workers_runtime) is unchanged: it
-- covers the new column as it covers the row.
ALTER TABLE workers
    ADD COLUMN kinds text[] NOT NULL DEFAULT '{}';
