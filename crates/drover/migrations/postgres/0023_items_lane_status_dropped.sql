-- drover 0023: items_lane_status dropped.
--
-- 0007 added it so counts for one lane read indexes, not the table. Since
-- 0020 the counts read the rollup, items_final, items_claim and
-- items_tenant_stale instead, and nothing else needs it. It was not free:
-- a claim and a completion each change the row's status, and an update that
-- changes an indexed column writes a new entry in every index whose
-- predicate the new row matches, so it cost every item two index entries on
-- the hot path (the burst benchmark's drain, docs/performance.md).
DROP INDEX IF EXISTS items_lane_status;
