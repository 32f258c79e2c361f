-- Every migration recorded, with whether it succeeded; compared as a set
-- with the embedded versions, since numbers land out of order.
SELECT version, success
FROM _sqlx_migrations
ORDER BY version
