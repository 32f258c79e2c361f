-- The age in seconds of the oldest transaction open in this database (0
-- when none but ours is): a long one holds back vacuum of the items table.
-- Sessions of other roles show no xact_start unless the login has
-- pg_read_all_stats (pg_monitor); see docs/operations.md.
SELECT coalesce(extract(epoch FROM max(clock_timestamp() - xact_start)), 0)::float8 AS age
FROM pg_stat_activity
WHERE datname = current_database()
  AND xact_start IS NOT NULL
  AND pid <> pg_backend_pid()
