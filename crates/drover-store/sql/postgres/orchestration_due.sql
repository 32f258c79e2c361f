-- Parked records whose park time has come, across tenants (system role),
-- oldest park first. $1 limit.
SELECT * FROM orchestrations
WHERE status = 'parked' AND parked_until <= now()
ORDER BY parked_until, id
LIMIT $1
