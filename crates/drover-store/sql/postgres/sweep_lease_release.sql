-- Gives up the sweep lease held under token $1, so the next sweeper need
-- not wait for it to pass; $2 (true) records now as the end of the last
-- completed pass. Fenced on the token: a stale holder changes nothing.
-- System role.
UPDATE sweep_lease
SET token = NULL, holder = NULL, expires_at = now(),
    last_pass_at = CASE WHEN $2 THEN now() ELSE last_pass_at END
WHERE name = 'sweep' AND token = $1
