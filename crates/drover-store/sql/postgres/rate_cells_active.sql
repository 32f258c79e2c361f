-- The cells still ahead of the transaction's clock (the only ones that can
-- hold a start back), read without a lock as the claim begins: only to
-- leave the scopes they hold back out of the candidates.
SELECT key, tat, now() AS now
FROM rate_cells
WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND tat > now()
