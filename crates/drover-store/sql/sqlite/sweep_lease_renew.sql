-- Extends the sweep lease to ?3, fenced on its token ?2 and on the lease not
-- having passed at ?1. No row changed: the token no longer holds it.
UPDATE sweep_lease
SET expires_at = ?3
WHERE name = 'sweep' AND token = ?2 AND expires_at > ?1
