-- The records of a batch's keys under the transaction's tenant, locked for
-- the batch's writes, in key order. $1 reconciler, $2 keys (sorted).
SELECT * FROM sync_records
WHERE reconciler = $1 AND key = ANY($2::text[])
ORDER BY key
FOR UPDATE
