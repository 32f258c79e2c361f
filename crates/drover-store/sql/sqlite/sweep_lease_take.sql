-- Takes the sweep lease for holder ?3 (token ?2) until ?4 when it is free
-- or its lease has passed at ?1. No row back: another holder's lease runs.
UPDATE sweep_lease
SET token = ?2, holder = ?3, expires_at = ?4
WHERE name = 'sweep' AND expires_at <= ?1
RETURNING token
