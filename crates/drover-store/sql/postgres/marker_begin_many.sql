-- Claim many idempotency markers of tenant $1 at once (distinct keys): each
-- inserted in flight, or taken over when expired or left in flight past $7
-- seconds. Returns the claims this call now holds. Runtime role.
INSERT INTO idempotency_markers AS m
    (tenant_id, principal_id, route, key, fingerprint, state, created_at, expires_at)
SELECT $1, u.principal_id, u.route, u.key, u.fingerprint, 'in_flight', now(),
       now() + make_interval(secs => $6)
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[])
    AS u(principal_id, route, key, fingerprint)
ON CONFLICT (tenant_id, principal_id, route, key) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint,
    state = 'in_flight',
    status = NULL,
    body = NULL,
    created_at = EXCLUDED.created_at,
    expires_at = EXCLUDED.expires_at
WHERE m.expires_at <= now()
   OR (m.state = 'in_flight' AND m.created_at <= now() - make_interval(secs => $7))
RETURNING m.principal_id, m.route, m.key
