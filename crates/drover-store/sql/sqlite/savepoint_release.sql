-- Forgets the savepoint, keeping its writes in the enclosing transaction.
RELEASE drover_chunk
