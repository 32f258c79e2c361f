-- drover 0051 on SQLite: a full group's deep backlog is parked out of the
-- claim's way (see the PostgreSQL migration; src/parking.rs).
--
-- A parked item is a pending item whose available_at (INTEGER
-- microseconds) was moved 31,556,952,000,000,000 µs (1,000 years) ahead by
-- the sweep; it is given back by the same number. Its range: at or after
-- 2200-01-01 (7258118400000000) and before 9000-01-01
-- (221845392000000000), so a dependant's 9999-12-31 hold
-- (253402214400000000) is not a parked item. The bounds are literals, here
-- and in every statement that reads these indexes: SQLite uses a partial
-- index only when the query repeats its terms.
--
-- items_group_next: a group's pending items in claim order (priority,
-- available_at, then the rowid every index ends with), so a pass reads a
-- group's front without walking its backlog. PostgreSQL's migration 0050
-- has it; SQLite had no such index. Items without a group cost no entry.
CREATE INDEX items_group_next ON items (tenant_id, kind, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL;

-- items_parked: a parked group's items in claim order (what a claim of
-- the group gives back first). Only parked items have an entry, in this
-- index and the next, so an enqueue, a claim or a completion of an item
-- that is not parked writes nothing here.
CREATE INDEX items_parked ON items (tenant_id, kind, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL
      AND available_at >= 7258118400000000 AND available_at < 221845392000000000;

-- items_parked_seq: the same in enqueue order, for ordered groups (the
-- enqueue order is the rowid, migration 0034, which ends every index),
-- and, by its leading columns, the groups with parked items (a loose
-- scan, one descent per group; park_groups.sql says why this index).
CREATE INDEX items_parked_seq ON items (tenant_id, kind, group_key)
    WHERE status = 'pending' AND group_key IS NOT NULL
      AND available_at >= 7258118400000000 AND available_at < 221845392000000000;
