-- Revoke a live token ($2: the store's clock).
UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL
