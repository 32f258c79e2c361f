-- The newest migration applied and whether any failed half-way.
SELECT coalesce(max(version), 0) AS applied,
       coalesce(min(success), 1) AS clean
FROM _sqlx_migrations
