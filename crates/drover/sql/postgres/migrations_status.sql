-- The newest migration applied and whether any failed half-way, from the
-- migrator's own table in drover's schema ({schema} is validated before it
-- is spliced). Sent over the simple protocol: nothing is prepared, so it is
-- safe through a transaction-pooling PgBouncer.
SELECT coalesce(max(version), 0)::int8 AS applied,
       coalesce(bool_and(success), true) AS clean
FROM "{schema}"._sqlx_migrations
