-- Takes the sweep lease for holder $2 (token $1) for $3 seconds from now
-- (database clock) when it is free or its lease has passed. No row back:
-- another holder's lease runs. Concurrent takers serialize on the row lock
-- and the later one re-checks the committed row, so one wins. System role.
UPDATE sweep_lease
SET token = $1, holder = $2, taken_at = now(),
    expires_at = now() + make_interval(secs => $3::float8)
WHERE name = 'sweep' AND expires_at <= now()
RETURNING token
