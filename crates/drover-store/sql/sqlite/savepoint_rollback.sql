-- Undoes the chunk since savepoint_begin.sql (the transaction stays open).
ROLLBACK TO drover_chunk
