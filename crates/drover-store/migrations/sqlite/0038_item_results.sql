-- drover on SQLite 0038: a handler's result, its progress, and a key that
-- holds only while the item is active (see the PostgreSQL migration and
-- docs/results.md). JSON is stored as text, as the payload is.
ALTER TABLE items ADD COLUMN result TEXT CHECK (result IS NULL OR json_valid(result));
ALTER TABLE items ADD COLUMN progress TEXT CHECK (progress IS NULL OR json_valid(progress));
ALTER TABLE items ADD COLUMN active_key TEXT
    CHECK (active_key IS NULL OR length(CAST(active_key AS BLOB)) BETWEEN 1 AND 512);

-- One active item per (tenant, kind, key): the index covers only pending
-- and claimed rows, so the database itself refuses a second active insert
-- (ON CONFLICT DO NOTHING skips it) and a row leaves the index the moment
-- it becomes final, with no write of its own.
CREATE UNIQUE INDEX items_active_key ON items (tenant_id, kind, active_key)
    WHERE active_key IS NOT NULL AND status IN ('pending', 'claimed');
