-- Whether the sweep lease is free or passed at ?1: the read a take makes
-- first, on a reader, so that while another holder's lease runs (the usual
-- answer when several processes share the file) asking costs no write lock.
-- The take itself re-checks in its own statement.
SELECT 1 FROM sweep_lease WHERE name = 'sweep' AND expires_at <= ?1
