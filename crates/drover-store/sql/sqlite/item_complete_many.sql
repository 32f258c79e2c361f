-- Marks many claimed items done in one statement, each row fenced on its
-- own tenant, token, status and lease. ?1 now, ?2 system actor, ?3 a JSON
-- array of [id, tenant_id, claim_token] triples as 32-digit hex. The plain
-- `id IN` lets the primary key drive; the row-value IN is the exact fence.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE id IN (SELECT unhex(value ->> 0) FROM json_each(?3))
  AND (id, tenant_id, claim_token) IN (
      SELECT unhex(value ->> 0), unhex(value ->> 1), unhex(value ->> 2) FROM json_each(?3))
  AND status = 'claimed'
  AND lease_expires_at > ?1
RETURNING id, linked
