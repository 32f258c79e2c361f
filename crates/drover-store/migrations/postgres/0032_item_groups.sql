-- drover 0032: an item's flow-control group (docs/flow-control.md), and the
-- outbox row's, so an item written through the outbox keeps the group its
-- producer gave it.
--
-- Nullable and without a default, so adding the column rewrites nothing and
-- holds the table's lock for an instant, even on an installation under load.
-- No CHECK either: validating one would read every row of `items` under that
-- lock. The name rule (`[a-z0-9_.:-]{1,128}`, as a kind's) is enforced by the
-- queue before any write (`validate_group`), as the SQLite schema also does.

ALTER TABLE items ADD COLUMN group_key text;
ALTER TABLE outbox ADD COLUMN group_key text;

-- A listing by group (drover list --group, GET /v1/items?group=) walks this
-- instead of the table, and so will the limits that count a group's items.
-- Partial: items without a group (most, in most installations) cost no
-- entry and no write. Built here, while every row's group is NULL, it
-- holds no entry yet; the build still reads each child once under the
-- table's SHARE lock (writes wait for that read, reads do not).
CREATE INDEX items_group ON items (group_key, id) WHERE group_key IS NOT NULL;
