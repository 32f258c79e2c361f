-- drover 0045: a freed slot handed over in the completion's round trip
-- (docs/flow-control.md, "The slot").
--
-- A worker whose claims a limit holds back used to write a completion
-- (one round trip and commit) and then claim again (a second one): a
-- binding per-group limit's slot stood idle for both between a group's
-- runs. complete_then_claim does both in one call and one transaction:
--
-- 1. the completions of one tenant, each fenced in the statement on its
--    claim token and unexpired lease, exactly as complete_items (0002,
--    0038) writes them, results included. It runs as the system role (a
--    system login need not be granted the runtime role), so the tenant is
--    named in the statement itself besides the tokens;
-- 2. then claim_limited (0036) with the caller's arguments: a later
--    statement of the same transaction, so its count of held slots sees
--    the slots the completions freed, and its scope locks and admission
--    are the limited claim's own. Nothing is admitted that a separate
--    claim after the completion's commit would not admit.
--
-- One row per claimed item, each carrying the ids that landed; one row
-- with no item when nothing was claimed. A failure rolls back both: the
-- caller retries the completion alone (its fence refuses a second write).
DO $do$
DECLARE
    v_sys text;
    f     text := 'complete_then_claim(uuid, uuid[], uuid[], jsonb[], text, text[], text, '
                  'float8, bigint, bigint, text, integer, text[], integer[], text[], '
                  'integer[], text[], text[])';
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();
    EXECUTE format($f$
CREATE FUNCTION complete_then_claim(
    p_tenant uuid, p_ids uuid[], p_tokens uuid[], p_results jsonb[],
    p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint, p_want bigint,
    p_lock text, p_lane_limit integer,
    p_kind_names text[], p_kind_limits integer[],
    p_group_kinds text[], p_group_limits integer[],
    p_ordered text[], p_hold text[])
RETURNS TABLE (landed uuid[], claimed items)
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
SET drover.tenant_id = ''
AS $body$
DECLARE
    v_landed uuid[];
    v_any    boolean := false;
    c        items;
BEGIN
    -- The triggers on items see the tenant as under complete_items.
    PERFORM set_config('drover.tenant_id', p_tenant::text, true);
    WITH done AS (
        UPDATE items
        SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
            result = d.result,
            updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
        FROM unnest(p_ids, p_tokens, p_results) AS d(id, token, result)
        WHERE items.id = d.id
          AND items.tenant_id = p_tenant
          AND items.claim_token = d.token
          AND items.lease_expires_at > now()
        RETURNING items.id
    )
    SELECT coalesce(array_agg(id), '{}') INTO v_landed FROM done;
    PERFORM set_config('drover.tenant_id', '', true);
    FOR c IN
        SELECT * FROM claim_limited(p_lane, p_kinds, p_worker, p_lease, p_limit, p_want,
                                    p_lock, p_lane_limit, p_kind_names, p_kind_limits,
                                    p_group_kinds, p_group_limits, p_ordered, p_hold)
    LOOP
        v_any := true;
        landed := v_landed;
        claimed := c;
        RETURN NEXT;
    END LOOP;
    IF NOT v_any THEN
        landed := v_landed;
        claimed := NULL;
        RETURN NEXT;
    END IF;
END
$body$
$f$, v_sys);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, v_sys);
    -- As claim_limited and complete_items: one generic plan per session
    -- that walks the indexes, and no JIT compilation.
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_bitmapscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_sort = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_hashjoin = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_mergejoin = off', f);
    EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
END
$do$;
