-- drover 0035 on SQLite: the kinds a worker handles, on its liveness row
-- (a JSON array, like lanes), so "why is it waiting" can tell an item whose
-- lane has live workers but none that runs its kind. Rows beaten before
-- this migration carry the empty list: read as "not recorded", any kind.
ALTER TABLE workers
    ADD COLUMN kinds TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(kinds) AND json_type(kinds) = 'array');
