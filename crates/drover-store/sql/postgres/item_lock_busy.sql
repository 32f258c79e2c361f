-- Whether a session other than this one holds a lock on items or one of
-- its partitions that a vacuum, an analyze or an index build takes
-- (SHARE UPDATE EXCLUSIVE and stronger, short of this transaction's own):
-- such a holder keeps it for as long as its work runs, and the rotation's
-- exclusive lock request would wait behind it with every claim, completion
-- and enqueue queued behind the request. The rotation then leaves the
-- child to a later pass instead of asking (the soak's wait record placed
-- a 111 ms claim behind the lock request waiting on an autovacuum).
SELECT EXISTS (
    SELECT 1
    FROM pg_locks AS l
    JOIN pg_partition_tree('items'::regclass) AS t ON t.relid = l.relation
    WHERE l.locktype = 'relation'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.pid <> pg_backend_pid()
      AND l.granted
      AND l.mode IN ('ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock',
                     'ExclusiveLock', 'AccessExclusiveLock')
) AS busy
