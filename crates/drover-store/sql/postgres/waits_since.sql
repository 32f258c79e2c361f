-- The wait minutes at or after $1, oldest first, then by lane.
SELECT minute, lane, oldest_ms
FROM queue_waits
WHERE minute >= $1
ORDER BY minute, lane
