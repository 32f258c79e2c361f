-- Removes one source's rate of a scope. ?1 scope, ?2 name, ?3 source.
DELETE FROM rate_limits WHERE scope = ?1 AND name = ?2 AND source = ?3
