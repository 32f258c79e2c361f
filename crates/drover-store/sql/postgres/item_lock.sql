-- The rotation's lock: no statement reads or writes items until it commits,
-- so the census it takes under it is the child's final state.
LOCK TABLE items IN ACCESS EXCLUSIVE MODE
