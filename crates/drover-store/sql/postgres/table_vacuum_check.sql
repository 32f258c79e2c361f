-- Before a vacuum of {table} in {schema} (both spliced in: validated
-- names): whether it is a table of the schema (no row: it is not), whether
-- the connecting login may vacuum it (PostgreSQL only warns, and does
-- nothing, when it may not: its owner or the database's, by membership;
-- a superuser; since 17 a holder of MAINTAIN), and how many vacuums it has
-- had, to tell a vacuum that SKIP_LOCKED skipped (for a partitioned table,
-- the fewest of its partitions', as in table_vacuum_after.sql).
SELECT pg_has_role(c.relowner, 'USAGE')
         OR pg_has_role(d.datdba, 'USAGE')
         OR CASE WHEN current_setting('server_version_num')::int >= 170000
                 THEN has_table_privilege(c.oid, 'MAINTAIN')
                 ELSE false END AS may_vacuum,
       coalesce((SELECT min(s.vacuum_count + s.autovacuum_count)
                 FROM pg_catalog.pg_stat_user_tables s
                 WHERE (s.relid = c.oid AND c.relkind <> 'p')
                    OR s.relid IN (SELECT i.inhrelid FROM pg_catalog.pg_inherits i
                                   WHERE i.inhparent = c.oid)), 0)::bigint AS vacuums
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_database d ON d.datname = current_database()
WHERE n.nspname = '{schema}'
  AND c.relname = '{table}'
  AND c.relkind IN ('r', 'm', 'p')
