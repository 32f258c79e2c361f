-- One item, never overwriting: a collision on the id or on
-- (tenant_id, idempotency_key) inserts nothing and returns no row.
-- ?1 id, ?2 tenant_id, ?3 kind, ?4 lane, ?5 payload, ?6 priority,
-- ?7 available_at, ?8 max_attempts, ?9 idempotency_key, ?10 created_by,
-- ?11 request_id, ?12 traceparent, ?13 created_at, ?14 now (updated_at),
-- ?15 group_key, ?16 active_key (the key when it holds only while active;
-- ?9 is then NULL).
INSERT INTO items (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claimed_by, claim_token, claim_seq, lease_expires_at,
    last_error, idempotency_key, created_by, request_id, traceparent,
    created_at, updated_at, updated_by, group_key, active_key
) VALUES (
    ?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7,
    0, ?8, NULL, NULL, 0, NULL,
    NULL, ?9, ?10, ?11, ?12,
    ?13, ?14, ?10, ?15, ?16
)
ON CONFLICT DO NOTHING
RETURNING *
