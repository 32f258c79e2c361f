-- At most $3 key rows of ids in [$1, $2) whose item is gone (its child was
-- dropped), deleted (system role). A stale row is harmless meanwhile: the
-- next insert of its key takes it over (migration 0026).
DELETE FROM item_keys
WHERE (tenant_id, idempotency_key) IN (
    SELECT k.tenant_id, k.idempotency_key
    FROM item_keys k
    WHERE k.item_id >= $1 AND k.item_id < $2
      AND NOT EXISTS (SELECT 1 FROM items i
                      WHERE i.id = k.item_id AND i.tenant_id = k.tenant_id
                        AND i.idempotency_key = k.idempotency_key)
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
