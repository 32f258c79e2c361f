-- Marks one claimed row done at ?3 (now), fenced on its token and lease.
UPDATE outbox
SET status = 'done', relayed_at = ?3, claim_token = NULL, lease_expires_at = NULL
WHERE id = ?1 AND claim_token = ?2 AND status = 'pending' AND lease_expires_at > ?3
