-- Stamps the rows of the relay's batch that could not be relayed with the
-- batch's claim (token $2, a lease of $3 seconds on the database clock), in
-- the batch's own transaction, so the relay records each failure after the
-- commit with the fenced outbox_fail.sql as any claim's failure.
UPDATE outbox
SET claim_token = $2,
    lease_expires_at = now() + make_interval(secs => $3)
WHERE id = ANY($1::uuid[])
  AND status = 'pending'
