-- The event purge waits at most this long for the ring's row locks and the
-- oldest child's lock: a long appender or reader delays the purge to the
-- next pass, never the appenders that would queue behind a waiting
-- ACCESS EXCLUSIVE request.
SET LOCAL lock_timeout = '200ms'
