-- A failed relay of one row of tenant ?1, fenced on token ?3 and the lease
-- at ?6 (now): one attempt spent; parked as failed at the budget ?5, else
-- pending again at ?7.
UPDATE outbox
SET attempts = attempts + 1,
    last_error = ?4,
    claim_token = NULL,
    lease_expires_at = NULL,
    status = CASE WHEN attempts + 1 >= ?5 THEN 'failed' ELSE 'pending' END,
    available_at = CASE WHEN attempts + 1 >= ?5 THEN available_at ELSE ?7 END
WHERE tenant_id = ?1 AND id = ?2 AND claim_token = ?3
  AND status = 'pending' AND lease_expires_at > ?6
RETURNING status, available_at
