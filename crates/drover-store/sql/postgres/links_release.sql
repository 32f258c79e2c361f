-- Dependants enqueued with every dependency already resolved: available
-- at once (or at the time they asked for).
UPDATE items i SET available_at = greatest(now(), coalesce(w.run_at, now()))
FROM item_waits w
WHERE w.item_id = i.id AND i.id = ANY($1::uuid[])
  AND i.status = 'pending' AND i.available_at = '9999-12-31 00:00:00+00'
