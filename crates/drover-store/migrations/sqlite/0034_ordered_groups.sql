-- drover 0034 on SQLite: ordered groups (docs/flow-control.md). A per-group
-- limit of 1 may order its groups: each group's items run in enqueue order,
-- and `on_dead_letter` says whether a dead-lettered item holds the rest.
-- The order is the rowid: the single writer assigns it at insert, so it is
-- the commit order too.

ALTER TABLE flow_limits ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0
    CHECK (ordered IN (0, 1));
ALTER TABLE flow_limits ADD COLUMN on_dead_letter TEXT NOT NULL DEFAULT 'continue'
    CHECK (on_dead_letter IN ('continue', 'hold'));

-- The head probe of a limited claim: the earlier items of one group that
-- may keep a later one waiting. Only those statuses have an entry, so a
-- group's finished items cost the probe nothing.
CREATE INDEX items_group_order ON items (tenant_id, kind, group_key)
    WHERE group_key IS NOT NULL AND status IN ('pending', 'claimed', 'failed');
