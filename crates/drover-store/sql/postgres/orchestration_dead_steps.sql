-- Live records whose current step's work item is in the dead letter (or was
-- cancelled by an operator through the item API), across
-- tenants (system role), oldest write first: the item's last attempt ended
-- by a timeout or a lease that expired with no attempt left, so no runner
-- will ever write the record's transition. The item is found by the key
-- every step item carries, drover.step:<id>:<version>. $1 limit.
SELECT o.*, i.attempts AS step_attempts, i.last_error AS step_error,
       i.updated_at AS step_failed_at, i.status = 'cancelled' AS step_cancelled
FROM orchestrations o
JOIN items i
  ON i.tenant_id = o.tenant_id
 AND i.idempotency_key = 'drover.step:' || o.id::text || ':' || o.version::text
WHERE o.status IN ('running', 'compensating')
  AND i.status IN ('failed', 'cancelled')
ORDER BY o.updated_at, o.id
LIMIT $1
