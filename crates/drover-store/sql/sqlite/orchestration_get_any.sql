-- A record by id whatever its tenant: only to tell an id collision from a
-- key collision on insert. ?1 id.
SELECT * FROM orchestrations WHERE id = ?1
