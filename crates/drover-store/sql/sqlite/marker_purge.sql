-- Delete up to $2 markers expired by $1 (microseconds).
DELETE FROM idempotency_markers
WHERE rowid IN (SELECT rowid FROM idempotency_markers WHERE expires_at <= ?1 LIMIT ?2)
