-- The same, read from the table itself: for a schema migrated by a binary
-- older than migration 0013 (the function does not exist yet), which only
-- the owner's login can read.
SELECT version, success
FROM "{schema}"._sqlx_migrations
ORDER BY version
