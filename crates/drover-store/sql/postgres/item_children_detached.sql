-- Items children a rotation detached whose drop did not follow (the
-- process stopped between the detach's commit and the drop): tables of
-- this schema named as children that are no partition of items. Their rows
-- are out of items and out of the count rollup already (system role).
SELECT c.relname::text AS name
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace
  AND c.relkind = 'r'
  AND c.relname ~ '^items_(c[0-9a-f]{12}|legacy)$'
  AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
