-- Records one lane's oldest waiting age for minute ?1 (µs), lane ?2, age
-- in ms ?3; a lane already recorded in the minute keeps the larger age.
INSERT INTO queue_waits (minute, lane, oldest_ms) VALUES (?1, ?2, ?3)
ON CONFLICT (minute, lane) DO UPDATE SET oldest_ms = max(oldest_ms, excluded.oldest_ms)
