-- The garbage of every table in the store's schema ({schema}, spliced in:
-- validated) as the statistics system last saw it, for the paced vacuum.
-- The last vacuum in microseconds since the epoch: this is read over the
-- simple protocol (pooler-safe), whose text timestamps depend on the
-- session's settings.
SELECT relname::text AS table_name,
       n_live_tup AS live,
       n_dead_tup AS dead,
       (extract(epoch FROM greatest(last_vacuum, last_autovacuum)) * 1000000)::bigint
         AS last_vacuum_us
FROM pg_catalog.pg_stat_user_tables
WHERE schemaname = '{schema}'
ORDER BY relname
