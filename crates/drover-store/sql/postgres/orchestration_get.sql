-- One record of the transaction's tenant (RLS). $1 id.
SELECT * FROM orchestrations WHERE id = $1
