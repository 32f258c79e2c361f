-- One item, never overwriting: a collision on the id or on (tenant, key)
-- inserts nothing and returns no row. Runs as the runtime role for $2's tenant.
-- The store stamps status, attempts, claim fields and updated_by itself.
-- $15 is the key when it holds only while the item is active ($9 is then
-- NULL): migration 0038's trigger skips the row while another active item
-- of the tenant and kind holds it.
INSERT INTO items (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
    last_error, idempotency_key, created_by, request_id, traceparent,
    created_at, updated_at, updated_by, group_key, active_key
) VALUES (
    $1, $2, $3, $4, $5, $6, 'pending', coalesce($7, now()),
    0, $8, NULL, NULL, 0, NULL,
    NULL, $9, $10, $11, $12,
    $13, now(), $10, $14, $15
)
ON CONFLICT DO NOTHING
RETURNING *
