-- Counts per status and the oldest pending row's creation time.
SELECT coalesce(sum(status = 'pending'), 0) AS pending,
       coalesce(sum(status = 'done'), 0) AS done,
       coalesce(sum(status = 'failed'), 0) AS failed,
       min(CASE WHEN status = 'pending' THEN created_at END) AS oldest
FROM outbox
