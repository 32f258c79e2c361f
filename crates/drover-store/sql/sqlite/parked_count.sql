-- The parked items of every tenant, counted in items_parked_seq, the
-- narrower of the two parked indexes (its terms repeated so SQLite uses
-- it). System operation.
SELECT count(*) AS n
FROM items INDEXED BY items_parked_seq
WHERE status = 'pending' AND group_key IS NOT NULL
  AND available_at >= 7258118400000000 AND available_at < 221845392000000000
