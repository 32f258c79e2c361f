-- drover 0016 (SQLite only): items_lane_status holds final rows only.
--
-- 0007 indexed every row not pending, so each item paid three extra index
-- writes on its way through the queue (an entry added at the claim, then
-- removed and added again at the completion, since the status is part of
-- the key) on SQLite's one write lock, shared by every claim, renewal and
-- completion. Final rows change status only when an operator retries them,
-- so an index of final rows costs one entry per item, written once at the
-- completion. counts_lane reads pending rows through items_pending and
-- claimed rows through items_claimed_lease (a small set: at most the
-- workers' capacity), so no status is left to a table scan.
DROP INDEX items_lane_status;
CREATE INDEX items_lane_status ON items (lane, status, kind)
    WHERE status IN ('done', 'failed', 'cancelled');
