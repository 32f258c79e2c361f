-- System role: how many events the child holds (what a truncation removes).
SELECT count(*) FROM events WHERE slot = $1
