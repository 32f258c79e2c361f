-- A migration's own lock: one migration of a schema at a time, any number
-- of schemas at once. Session-level (the migrator runs its own
-- transactions); released by migrate_unlock_schema.sql. $1 schema.
SELECT pg_advisory_lock(hashtextextended('drover.migrate:' || $1, 0))
