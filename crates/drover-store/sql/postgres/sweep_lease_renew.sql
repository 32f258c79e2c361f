-- Extends the sweep lease to $2 seconds from now, fenced on its token $1
-- and on the lease not having passed. No row changed: the token no longer
-- holds it. System role.
UPDATE sweep_lease
SET expires_at = now() + make_interval(secs => $2::float8)
WHERE name = 'sweep' AND token = $1 AND expires_at > now()
