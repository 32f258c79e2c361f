-- An item whose tenant is gone: failed, conditioned on its token. System
-- role; deliberately no audit entry (the tenant's audit is gone too).
UPDATE items
SET status = 'failed', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    last_error = 'orphaned: tenant gone',
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = $1 AND claim_token = $2 AND status = 'claimed'
