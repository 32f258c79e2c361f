-- The rotation waits at most this long for a child's lock, so a long
-- writer delays the purge, never the writers queued behind the rotation.
SET LOCAL lock_timeout = '2s'
