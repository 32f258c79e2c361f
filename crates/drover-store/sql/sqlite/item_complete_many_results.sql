-- item_complete_many.sql with a result per item: ?3 a JSON array of
-- [id, tenant_id, claim_token, result] (result JSON, or null for none).
-- Used only for a batch where some item has a result, so a batch without
-- any runs item_complete_many.sql unchanged.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    result = (SELECT CASE WHEN json_type(c.value, '$[3]') = 'null' THEN NULL
                          ELSE c.value -> 3 END
              FROM json_each(?3) AS c
              WHERE unhex(c.value ->> 0) = items.id),
    updated_at = ?1, updated_by = ?2
WHERE id IN (SELECT unhex(value ->> 0) FROM json_each(?3))
  AND (id, tenant_id, claim_token) IN (
      SELECT unhex(value ->> 0), unhex(value ->> 1), unhex(value ->> 2) FROM json_each(?3))
  AND status = 'claimed'
  AND lease_expires_at > ?1
RETURNING id
