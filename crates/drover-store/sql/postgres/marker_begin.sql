-- Claim an idempotency marker: insert it in flight, or take over one that
-- expired or whose request died in flight ($7 seconds). Returns a row only
-- when this request now holds it. Runtime role, tenant $1.
INSERT INTO idempotency_markers AS m
    (tenant_id, principal_id, route, key, fingerprint, state, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, 'in_flight', now(), now() + make_interval(secs => $6))
ON CONFLICT (tenant_id, principal_id, route, key) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint,
    state = 'in_flight',
    status = NULL,
    body = NULL,
    created_at = EXCLUDED.created_at,
    expires_at = EXCLUDED.expires_at
WHERE m.expires_at <= now()
   OR (m.state = 'in_flight' AND m.created_at <= now() - make_interval(secs => $7))
RETURNING true AS started
