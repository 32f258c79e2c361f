-- Marks claimed rows done (system role), each fenced on its own token and
-- its lease on the database clock; a stale claim matches nothing.
UPDATE outbox o
SET status = 'done',
    relayed_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL
FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
WHERE o.id = c.id
  AND o.claim_token = c.token
  AND o.status = 'pending'
  AND o.lease_expires_at > now()
RETURNING o.id
