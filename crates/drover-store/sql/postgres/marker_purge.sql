-- Delete up to $1 expired markers. System role.
DELETE FROM idempotency_markers
WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM idempotency_markers WHERE expires_at <= now() LIMIT $1
))
