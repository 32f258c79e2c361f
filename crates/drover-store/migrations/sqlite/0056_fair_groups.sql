-- drover 0056 on SQLite: fair share by group inside each tenant's share,
-- an option per lane, as on PostgreSQL: fair_lanes.by_group, the inner
-- stride scheduler's passes per (lane, tenant, group) (the ungrouped
-- bucket under '', the tenant's group virtual time under '*'), and
-- items_fair_group, partial on group_key IS NOT NULL so an ungrouped
-- enqueue writes nothing more.

ALTER TABLE fair_lanes ADD COLUMN by_group INTEGER NOT NULL DEFAULT 0 CHECK (by_group IN (0, 1));

CREATE TABLE fair_group_passes (
    lane      TEXT    NOT NULL,
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    group_key TEXT    NOT NULL,
    pass      INTEGER NOT NULL,
    started   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, tenant_id, group_key)
) STRICT;

CREATE INDEX items_fair_group ON items (lane, tenant_id, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL;
