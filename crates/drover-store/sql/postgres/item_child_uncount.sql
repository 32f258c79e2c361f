-- The settled rows of a dropped child leave the count rollup (one line per
-- group, from item_child_tally.sql).
UPDATE item_counts AS c
SET n = c.n - u.settled
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int8[])
     AS u(tenant_id, lane, kind, status, settled)
WHERE c.tenant_id = u.tenant_id AND c.lane = u.lane AND c.kind = u.kind
  AND c.status = u.status AND u.settled > 0
