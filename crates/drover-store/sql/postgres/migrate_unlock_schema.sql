-- Gives back migrate_lock_schema.sql's lock. $1 schema.
SELECT pg_advisory_unlock(hashtextextended('drover.migrate:' || $1, 0))
