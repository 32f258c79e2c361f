-- drover 0007: counts for one lane without reading the whole table.
-- Pending rows through items_pending (lane leads it), every other status
-- through this index (pending rows left out: items_pending holds them).
CREATE INDEX items_lane_status ON items (lane, status, kind) WHERE status <> 'pending';
