-- Gives up the sweep lease held under token ?2 at ?1, so the next sweeper
-- need not wait for it to pass; ?3 (true) records ?1 as the end of the last
-- completed pass. Fenced on the token: a stale holder changes nothing.
UPDATE sweep_lease
SET token = NULL, holder = NULL, expires_at = ?1,
    last_pass_at = CASE WHEN ?3 THEN ?1 ELSE last_pass_at END
WHERE name = 'sweep' AND token = ?2
