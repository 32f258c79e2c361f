-- drover 0032 on SQLite: an item's flow-control group, and the outbox row's,
-- as on PostgreSQL. The name rule is a CHECK here (an embedded database is
-- small, and SQLite checks the existing rows, all NULL, in one pass).

ALTER TABLE items ADD COLUMN group_key TEXT
    CHECK (group_key IS NULL OR (length(group_key) BETWEEN 1 AND 128
                                 AND group_key NOT GLOB '*[^a-z0-9_.:-]*'));
ALTER TABLE outbox ADD COLUMN group_key TEXT
    CHECK (group_key IS NULL OR (length(group_key) BETWEEN 1 AND 128
                                 AND group_key NOT GLOB '*[^a-z0-9_.:-]*'));

-- Listings by group walk this; items without a group cost no entry.
CREATE INDEX items_group ON items (group_key, created_at) WHERE group_key IS NOT NULL;
