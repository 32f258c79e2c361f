-- Done, for many items of one tenant: each row fenced on its own token.
-- The fence is `claim_token = token AND lease_expires_at > now()`; the
-- items_claim_fields CHECK makes a non-null token imply status = 'claimed',
-- so the status test is left out on purpose: with it, the planner may answer
-- the fence from the partial index of claimed rows (a bitmap scan over every
-- claimed row and its dead entries) instead of one primary-key probe per id.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
WHERE items.id = c.id
  AND items.claim_token = c.token
  AND items.lease_expires_at > now()
RETURNING items.id
