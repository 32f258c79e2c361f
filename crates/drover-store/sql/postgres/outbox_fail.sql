-- A failed relay of one row of the transaction's tenant, fenced on the
-- claim token and lease: one attempt spent; parked as failed at the budget
-- ($4), else pending again after $5 seconds.
UPDATE outbox
SET attempts = attempts + 1,
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL,
    status = CASE WHEN attempts + 1 >= $4 THEN 'failed' ELSE 'pending' END,
    available_at = CASE WHEN attempts + 1 >= $4 THEN available_at
                        ELSE now() + make_interval(secs => $5) END
WHERE id = $1
  AND claim_token = $2
  AND status = 'pending'
  AND lease_expires_at > now()
RETURNING status, available_at
