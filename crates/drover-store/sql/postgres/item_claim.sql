-- Claim: one round trip into claim_items (migration 0002 holds the
-- statement, run as the system role). {schema} is the validated schema name.
SELECT * FROM "{schema}".claim_items($1, $2, $3, $4, $5)
