-- drover 0051: a full group's deep backlog is parked out of the claim's
-- way (docs/flow-control.md, "Deep backlogs"; src/parking.rs).
--
-- A parked item is a pending item whose available_at was moved
-- 31,556,952,000 seconds (1,000 years) ahead by the sweep; it is given back
-- by the same number. These two indexes hold parked items only (the range
-- is the parked one: at or after 2200-01-01, before the 9999-12-31 hold of
-- a dependant), so an enqueue, a claim or a completion of an item that is
-- not parked writes no entry in them.
--
-- items_parked: a parked group's items in claim order (what a claim of
-- the group gives back first), and, by its leading columns, the groups
-- with parked items (a loose scan, one descent per group).
-- items_parked_seq: the same in enqueue order, for ordered groups.
--
-- No table: which groups are parked is read from the items themselves, so
-- nothing can disagree with them.

CREATE INDEX items_parked ON items (tenant_id, kind, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL
      AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00';

CREATE INDEX items_parked_seq ON items (tenant_id, kind, group_key, seq)
    WHERE status = 'pending' AND group_key IS NOT NULL
      AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00';
