-- One record under the transaction's tenant. $1 reconciler, $2 key.
SELECT * FROM sync_records WHERE reconciler = $1 AND key = $2
