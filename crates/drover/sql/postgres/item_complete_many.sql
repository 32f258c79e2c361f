-- Done, for many items of one tenant: each row fenced on its own token.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
WHERE items.id = c.id
  AND items.claim_token = c.token
  AND items.status = 'claimed'
  AND items.lease_expires_at > now()
RETURNING items.id
