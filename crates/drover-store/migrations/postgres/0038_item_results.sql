-- drover 0038: work that waits for work, the item's own half: a handler's
-- result, its progress, and a key that holds only while the item is active
-- (docs/results.md).
--
-- result    jsonb   what the handler returned, written by the fenced
--                   statement that completes the item (item_complete.sql,
--                   complete_items below): the same write, no second one.
-- progress  jsonb   {"value": n, "data": {...}} as the handler last reported
--                   it, written fenced on the claim token; kept across retries
--                   (nothing clears it) so the next run can resume.
-- active_key text   an idempotency key that holds only while the item is
--                   pending or claimed (enqueue option unique_while_active).
--
-- Nullable without defaults: adding them rewrites nothing and holds the
-- table's lock for an instant. They go with their row: the purge by
-- retention (row by row, or a whole child dropped) removes them with it.
ALTER TABLE items ADD COLUMN result jsonb;
ALTER TABLE items ADD COLUMN progress jsonb;
ALTER TABLE items ADD COLUMN active_key text;

-- Active keys. items is partitioned by id, and a unique index must include
-- the partition key, so "one active item per (tenant, kind, key)" cannot be
-- a partial unique index on items; as item_keys (0026) does for idempotency
-- keys, this table's primary key is what refuses the second insert. A
-- BEFORE INSERT trigger (rows with an active key only, by its WHEN clause:
-- every other insert does not call it) claims the key here; while the row
-- it names is pending or claimed, the new item is skipped (ON CONFLICT DO
-- NOTHING's contract: not inserted, not returned) and the caller reads the
-- active one back. A key whose item is final (or gone) is taken over by the
-- new item. Completing an item does not touch this table: the hot path is
-- unchanged, and the key frees itself when its item leaves the active
-- states.
CREATE TABLE item_active_keys (
    tenant_id  uuid NOT NULL,
    kind       text NOT NULL,
    active_key text NOT NULL,
    item_id    uuid NOT NULL,
    PRIMARY KEY (tenant_id, kind, active_key)
);
CREATE INDEX item_active_keys_item ON item_active_keys (item_id);
ALTER TABLE item_active_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_active_keys FORCE ROW LEVEL SECURITY;

-- Under READ COMMITTED the insert of the key waits for a concurrent insert
-- of the same key and then sees its outcome, so of many concurrent
-- enqueues exactly one claims a free key; the takeover of a final item's
-- key is conditioned on the owner it read, so two takers cannot both win.
CREATE FUNCTION items_active_key_claim() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_owner uuid;
BEGIN
    INSERT INTO item_active_keys (tenant_id, kind, active_key, item_id)
    VALUES (NEW.tenant_id, NEW.kind, NEW.active_key, NEW.id)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    SELECT item_id INTO v_owner FROM item_active_keys
    WHERE tenant_id = NEW.tenant_id AND kind = NEW.kind AND active_key = NEW.active_key;
    IF v_owner = NEW.id THEN
        -- The same item again: a survivor moving partitions, or a repeated
        -- insert that the primary key then refuses.
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM items
               WHERE id = v_owner AND status IN ('pending', 'claimed')) THEN
        RETURN NULL;
    END IF;
    UPDATE item_active_keys SET item_id = NEW.id
    WHERE tenant_id = NEW.tenant_id AND kind = NEW.kind AND active_key = NEW.active_key
      AND item_id = v_owner;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    -- Another insert took the key over first.
    RETURN NULL;
END $$;

CREATE TRIGGER items_active_key_claim BEFORE INSERT ON items
    FOR EACH ROW WHEN (NEW.active_key IS NOT NULL)
    EXECUTE FUNCTION items_active_key_claim();

-- The collision read-back after a refused insert looks the active item up
-- by key.
CREATE INDEX items_active_key ON items (tenant_id, kind, active_key)
    WHERE active_key IS NOT NULL;

-- Done with results, for many items of one tenant: complete_items (0002)
-- with a result per item. The worker's batched completion calls this one
-- only when some item of the batch has a result, so a batch without
-- results runs the very statement it ran before.
CREATE FUNCTION complete_items(p_tenant uuid, p_ids uuid[], p_tokens uuid[], p_results jsonb[])
RETURNS SETOF uuid
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET drover.tenant_id = ''
AS $$
BEGIN
    PERFORM set_config('drover.tenant_id', p_tenant::text, true);
    RETURN QUERY
    UPDATE items
    SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        result = c.result,
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    FROM unnest(p_ids, p_tokens, p_results) AS c(id, token, result)
    WHERE items.id = c.id
      AND items.claim_token = c.token
      AND items.lease_expires_at > now()
    RETURNING items.id;
END
$$;
REVOKE ALL ON FUNCTION complete_items(uuid, uuid[], uuid[], jsonb[]) FROM PUBLIC;

DO $do$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
    f constant text := 'complete_items(uuid, uuid[], uuid[], jsonb[])';
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY item_active_keys_runtime ON item_active_keys TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_active_keys_system ON item_active_keys TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON item_active_keys TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON item_active_keys TO %I', v_sys);
    -- As the three-argument function: the runtime role, one generic plan.
    EXECUTE format('ALTER FUNCTION %s SET role = %I', f, v_rt);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, v_rt);
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_bitmapscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_sort = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_hashjoin = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_mergejoin = off', f);
END
$do$;
