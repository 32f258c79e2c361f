-- drover 0034: ordered groups (docs/flow-control.md). A per-group limit of
-- 1 may order its groups: each group's items run one at a time in enqueue
-- order, and `on_dead_letter` says whether a dead-lettered item holds the
-- rest of its group until an operator retries or cancels it.
--
-- The enqueue order is `items.seq`, taken from a sequence as the row is
-- inserted. A sequence, not the id: ids are minted by producers, whose
-- clocks differ, so two enqueues one after the other from two hosts could
-- carry ids in the other order. Two enqueues that commit one after the
-- other always carry increasing seq.
--
-- Nullable, and the default set after the column exists, so adding it
-- rewrites nothing. Rows from before keep NULL, except the grouped ones
-- not yet final (groups are as new as 0032, so they are few): they are
-- numbered here in id order, so a head probe never meets a NULL.

ALTER TABLE flow_limits
    ADD COLUMN ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN on_dead_letter text NOT NULL DEFAULT 'continue'
        CONSTRAINT flow_limits_on_dead_letter CHECK (on_dead_letter IN ('continue', 'hold')),
    ADD CONSTRAINT flow_limits_ordered CHECK (NOT ordered OR (scope = 'group' AND concurrency = 1));

CREATE SEQUENCE items_seq;
ALTER TABLE items ADD COLUMN seq bigint;
ALTER TABLE items ALTER COLUMN seq SET DEFAULT nextval('items_seq');
UPDATE items i
SET seq = n.seq
FROM (SELECT id, nextval('items_seq') AS seq
      FROM (SELECT id FROM items
            WHERE group_key IS NOT NULL AND seq IS NULL
              AND status IN ('pending', 'claimed', 'failed')
            ORDER BY id) AS o) AS n
WHERE i.id = n.id;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('GRANT USAGE ON SEQUENCE items_seq TO %I, %I', v_rt, v_sys);
END
$$;

-- The head probe of a limited claim: the earlier items of one group that
-- may keep a later one waiting. Only those statuses have an entry, so a
-- group's finished items cost the probe nothing; items without a group
-- (most, in most installations) cost no entry and no write.
CREATE INDEX items_group_order ON items (tenant_id, kind, group_key, seq)
    WHERE group_key IS NOT NULL AND status IN ('pending', 'claimed', 'failed');
