-- The checkpoint of one reconciler under the transaction's tenant (RLS).
-- $1 reconciler.
SELECT * FROM sync_checkpoints WHERE reconciler = $1
