-- Removes one source's setting of a limit. ?1 scope, ?2 name, ?3 source.
DELETE FROM flow_limits WHERE scope = ?1 AND name = ?2 AND source = ?3
