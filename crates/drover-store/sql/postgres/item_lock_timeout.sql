-- The rotation of items children waits at most this long for its lock on
-- items: a long transaction delays the rotation, never the claims and
-- completions that would queue behind the waiting lock request.
SET LOCAL lock_timeout = '200ms'
