-- The cells of the keys $1 still ahead of the clock, with it: what holds
-- one item's start back now ("why is it waiting"). The clock comes back
-- on a row of its own (key NULL) so it is read even when no cell is.
SELECT key, tat, now() AS now
FROM rate_cells
WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND key = ANY($1) AND tat > now()
UNION ALL
SELECT NULL, NULL, now()
