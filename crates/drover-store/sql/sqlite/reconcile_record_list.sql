-- Records of one reconciler and tenant, in key order. ?1 tenant,
-- ?2 reconciler, ?3 only those parked for review, ?4 after this key (or
-- NULL), ?5 limit.
SELECT * FROM sync_records
WHERE tenant_id = ?1 AND reconciler = ?2
  AND (?3 = 0 OR review IS NOT NULL)
  AND (?4 IS NULL OR key > ?4)
ORDER BY key
LIMIT ?5
