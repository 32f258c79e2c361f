-- Parked records whose park time has come, across tenants (system
-- operation), oldest park first. ?1 now, ?2 limit.
SELECT * FROM orchestrations
WHERE status = 'parked' AND parked_until <= ?1
ORDER BY parked_until, id
LIMIT ?2
