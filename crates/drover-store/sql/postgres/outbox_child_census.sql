-- What child $1 holds: pending rows (they pin it), done rows relayed at or
-- after $2 (not yet past retention: they pin it too), and all rows.
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'done' AND relayed_at >= $2) AS young,
       count(*) FILTER (WHERE status = 'done') AS done
FROM outbox
WHERE slot = $1
