-- Serializes the claims that stamp rows (outbox_claim.sql) of this
-- installation until their transaction ends, so each one's check of the
-- live event claims sees the claims committed before it.
SELECT pg_advisory_xact_lock(hashtext('drover.outbox_claim'), hashtext(current_schema()))
