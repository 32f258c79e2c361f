-- The parked items of every tenant (items_parked). System role.
SELECT count(*) AS n
FROM items
WHERE status = 'pending' AND group_key IS NOT NULL
  AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
