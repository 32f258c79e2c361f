-- Every migration recorded in the migrator's own table in drover's schema,
-- with whether it succeeded ({schema} is validated before it is spliced),
-- through the function migration 0013 grants to the runtime and system
-- roles (they cannot read the table itself). Compared as a set with the
-- embedded versions, since numbers land out of order. Sent over the simple
-- protocol: nothing is prepared, so it is safe through a transaction-pooling
-- PgBouncer.
SELECT version, success
FROM "{schema}".drover_migration_versions()
ORDER BY version
