-- The relay's claim (system role): up to $1 pending rows, available and
-- holding no live claim, oldest first, skipping rows another relay is
-- claiming right now; each stamped with the batch's token $2 and a lease
-- of $3 seconds on the database clock.
WITH picked AS (
    SELECT id, slot
    FROM outbox
    WHERE status = 'pending'
      AND available_at <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
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
          o.claim_token, o.lease_expires_at, o.relayed_at
