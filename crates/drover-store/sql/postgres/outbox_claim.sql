-- The relay's claim (system role): up to $1 pending rows, available and
-- holding no live claim, oldest first, skipping rows another relay is
-- claiming right now; each stamped with the batch's token $2 and a lease
-- of $3 seconds on the database clock.
--
-- An event.* row is taken only while no other claim relays its tenant's
-- events: no live claim holds an event.* row of the tenant (claims are
-- serialized by outbox_claim_serialize.sql, run first in the claim's
-- transaction, so this statement's snapshot sees every committed claim),
-- and no one-transaction batch holds the tenant's event lock
-- (outbox_claim_locked.sql). One tenant's events are so relayed by one
-- batch at a time, oldest first.
WITH picked AS (
    SELECT id, slot
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
)
UPDATE outbox o
SET claim_token = $2,
    lease_expires_at = now() + make_interval(secs => $3)
FROM picked
WHERE o.id = picked.id AND o.slot = picked.slot
RETURNING o.id, o.tenant_id, o.kind, o.payload::text AS payload, o.actor, o.request_id,
          o.traceparent, o.created_at, o.status, o.attempts, o.available_at, o.last_error,
          o.claim_token, o.lease_expires_at, o.relayed_at, o.lane, o.priority, o.max_attempts, o.group_key
