-- Marks the rows of the relay's batch done (system role), in the batch's
-- own transaction: they are locked by its claim (outbox_claim_locked.sql),
-- so no other relay can have taken them and no token fence is needed. One
-- write per row: the claim itself wrote nothing.
UPDATE outbox
SET status = 'done',
    relayed_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = ANY($1::uuid[])
  AND status = 'pending'
RETURNING id
