-- Every migration recorded in the migrator's own table in drover's schema,
-- with whether it succeeded ({schema} is validated before it is spliced).
-- Compared as a set with the embedded versions, since numbers land out of
-- order. Sent over the simple protocol: nothing is prepared, so it is safe
-- through a transaction-pooling PgBouncer.
SELECT version, success
FROM "{schema}"._sqlx_migrations
ORDER BY version
