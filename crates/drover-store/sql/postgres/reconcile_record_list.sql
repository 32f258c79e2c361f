-- Records of one reconciler under the transaction's tenant, in key order.
-- $1 reconciler, $2 only those parked for review, $3 after this key (or
-- NULL), $4 limit.
SELECT * FROM sync_records
WHERE reconciler = $1
  AND (NOT $2 OR review IS NOT NULL)
  AND ($3::text IS NULL OR key > $3)
ORDER BY key
LIMIT $4
