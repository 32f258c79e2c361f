-- Takes child {child} whole before it is emptied: every writer into it has
-- committed (or rolled back) once this returns, so the check that follows
-- sees every row it will ever hold.
LOCK TABLE {child} IN ACCESS EXCLUSIVE MODE
