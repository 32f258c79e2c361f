-- Delete rows no scheduler has seen since $1 (schedules removed from code).
DELETE FROM schedules WHERE seen_at < $1
