-- One record, locked until the transaction ends: a signal and a park of the
-- same record serialize on this lock. $1 id.
SELECT * FROM orchestrations WHERE id = $1 FOR UPDATE
