-- The database clock: the authority for ticks, as for leases.
SELECT now()
