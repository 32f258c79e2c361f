-- After a vacuum of {table} in {schema} (spliced in: validated names): its
-- garbage as the statistics system now sees it (a vacuum reports its own
-- counts at once), and its vacuum count, as in table_vacuum_check.sql.
SELECT relname::text AS table_name,
       n_live_tup AS live,
       n_dead_tup AS dead,
       (extract(epoch FROM greatest(last_vacuum, last_autovacuum)) * 1000000)::bigint
         AS last_vacuum_us,
       vacuum_count + autovacuum_count AS vacuums
FROM pg_catalog.pg_stat_user_tables
WHERE schemaname = '{schema}'
  AND relname = '{table}'
