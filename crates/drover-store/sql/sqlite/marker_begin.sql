-- Claim an idempotency marker: insert it in flight, or take over one that
-- expired or whose request died in flight. $6: now, $7: expiry, $8: the
-- in-flight cut-off (all microseconds). Returns a row only when taken.
INSERT INTO idempotency_markers
    (tenant_id, principal_id, route, key, fingerprint, state, created_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, 'in_flight', ?6, ?7)
ON CONFLICT (tenant_id, principal_id, route, key) DO UPDATE
SET fingerprint = excluded.fingerprint,
    state = 'in_flight',
    status = NULL,
    body = NULL,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at
WHERE idempotency_markers.expires_at <= ?6
   OR (idempotency_markers.state = 'in_flight' AND idempotency_markers.created_at <= ?8)
RETURNING 1 AS started
