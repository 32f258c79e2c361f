-- Per lane with pending items, the age in seconds of the oldest available
-- one by the database clock (0 when only future items wait). System role.
SELECT lane,
       coalesce(extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now())), 0)::float8
           AS age
FROM items
WHERE status = 'pending'
GROUP BY lane
ORDER BY lane
