-- drover 0007: counts for one lane without reading the whole table.
--
-- Queue::counts_lane answers from two index scans: pending rows through
-- items_claim (lane leads it), every other status through this index.
-- Pending rows are left out of it, since items_claim already holds them:
-- an enqueue adds no entry here, and a claim or completion adds the one
-- entry it would add to any index on the row.
CREATE INDEX items_lane_status ON items (lane, status, kind) WHERE status <> 'pending';
