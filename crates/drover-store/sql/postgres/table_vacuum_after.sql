-- After a vacuum of {table} in {schema} (spliced in: validated names): its
-- garbage as the statistics system now sees it (a vacuum reports its own
-- counts at once), and its vacuum count, as in table_vacuum_check.sql. A
-- partitioned table (items, outbox) has no statistics of its own: its
-- partitions' are summed (the vacuum count is the fewest any partition
-- had, so it moves only once the vacuum reached each of them).
SELECT '{table}'::text AS table_name,
       sum(s.n_live_tup)::bigint AS live,
       sum(s.n_dead_tup)::bigint AS dead,
       (extract(epoch FROM max(greatest(s.last_vacuum, s.last_autovacuum))) * 1000000)::bigint
         AS last_vacuum_us,
       min(s.vacuum_count + s.autovacuum_count)::bigint AS vacuums
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_stat_user_tables s
  ON (s.relid = c.oid AND c.relkind <> 'p') OR s.relid IN (SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent = c.oid)
WHERE n.nspname = '{schema}'
  AND c.relname = '{table}'
HAVING count(*) > 0
