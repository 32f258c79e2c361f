-- Records each lane's oldest waiting age for minute $1 (lanes $2, ages in
-- ms $3); a lane already recorded in the minute keeps the larger age.
INSERT INTO queue_waits (minute, lane, oldest_ms)
SELECT $1, w.lane, w.oldest_ms
FROM unnest($2::text[], $3::bigint[]) AS w (lane, oldest_ms)
ON CONFLICT (minute, tenant_id, lane)
DO UPDATE SET oldest_ms = greatest(queue_waits.oldest_ms, excluded.oldest_ms)
