-- The relay's claim inside its one-transaction batch (system role): up to
-- $1 pending rows, available and holding no live claim, oldest first,
-- locked FOR UPDATE until the batch commits or rolls back (SKIP LOCKED: a
-- concurrent batch takes other rows). Nothing is written: the lock is the
-- claim, so a batch cut off part-way leaves no claim behind. The claim
-- columns answer the batch's token $2 and a lease of $3 seconds on the
-- database clock, the handle the rows that fail are stamped with
-- (outbox_hold_locked.sql) before the commit.
SELECT id, tenant_id, kind, payload::text AS payload, actor, request_id, traceparent,
       created_at, status, attempts, available_at, last_error,
       $2::uuid AS claim_token, now() + make_interval(secs => $3) AS lease_expires_at,
       relayed_at
FROM outbox
WHERE status = 'pending'
  AND available_at <= now()
  AND (lease_expires_at IS NULL OR lease_expires_at <= now())
ORDER BY created_at
LIMIT $1
FOR UPDATE SKIP LOCKED
