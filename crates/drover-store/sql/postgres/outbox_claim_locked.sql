-- The relay's claim inside its one-transaction batch (system role): up to
-- $1 pending rows, available and holding no live claim, oldest first,
-- locked FOR UPDATE until the batch commits or rolls back (SKIP LOCKED: a
-- concurrent batch takes other rows). Nothing is written: the lock is the
-- claim, so a batch cut off part-way leaves no claim behind. The claim
-- columns answer the batch's token $2 and a lease of $3 seconds on the
-- database clock, the handle the rows that fail are stamped with
-- (outbox_hold_locked.sql) before the commit.
--
-- An event.* row is taken only while no other batch relays its tenant's
-- events: the batch takes the tenant's event lock (transaction-scoped,
-- tried, never waited for) and no live stamped claim holds an event.* row
-- of the tenant (outbox_claim.sql). So one tenant's events are appended by
-- one batch at a time, oldest first, and a later batch cannot append a
-- younger event before an older one a concurrent batch holds.
SELECT id, tenant_id, kind, payload::text AS payload, actor, request_id, traceparent,
       created_at, status, attempts, available_at, last_error,
       $2::uuid AS claim_token, now() + make_interval(secs => $3) AS lease_expires_at,
       relayed_at, lane, priority, max_attempts, group_key
FROM outbox o
WHERE status = 'pending'
  AND available_at <= now()
  AND (lease_expires_at IS NULL OR lease_expires_at <= now())
  AND (o.kind NOT LIKE 'event.%' OR (
        NOT EXISTS (SELECT 1 FROM outbox c
                    WHERE c.tenant_id = o.tenant_id
                      AND c.claim_token IS NOT NULL AND c.kind LIKE 'event.%'
                      AND c.status = 'pending' AND c.lease_expires_at > now())
        AND pg_try_advisory_xact_lock(hashtext('drover.outbox_events'),
                                      hashtext(current_schema() || ':' || o.tenant_id::text))))
ORDER BY created_at
LIMIT $1
FOR UPDATE SKIP LOCKED
