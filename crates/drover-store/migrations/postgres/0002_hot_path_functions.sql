-- drover 0002: the hot path in one round trip each.
--
-- A claim and a batched completion used to be BEGIN; SET LOCAL ROLE ...;
-- statement; COMMIT: three round trips around one statement. As functions
-- with SET clauses they run in a single autocommit statement, under the same
-- role and tenant rules: a function's SET clause holds only while it runs, so
-- nothing leaks to the caller's session or to the next user of a pooled
-- connection. The caller (the connecting user) must be a member of the role
-- (0001 grants it). search_path is fixed to this schema at creation.

-- Claim up to p_limit available items of lane p_lane (kinds p_kinds, empty =
-- every kind) for p_worker, with a lease of p_lease seconds from the database
-- clock. System role: across tenants. SKIP LOCKED lets concurrent claimers
-- pass each other's rows, so no two get the same item.
CREATE FUNCTION claim_items(p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint)
RETURNS SETOF items
LANGUAGE sql
SET role = 'drover_system'
SET search_path FROM CURRENT
AS $$
WITH picked AS (
    SELECT id
    FROM items
    WHERE status = 'pending'
      AND lane = p_lane
      AND available_at <= now()
      AND (cardinality(p_kinds) = 0 OR kind = ANY(p_kinds))
    ORDER BY priority, available_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
)
UPDATE items
SET status = 'claimed',
    claim_token = gen_random_uuid(),
    claim_seq = items.claim_seq + 1,
    claimed_by = p_worker,
    lease_expires_at = now() + make_interval(secs => p_lease),
    updated_at = now(),
    updated_by = '00000000-0000-0000-0000-000000000000'::uuid
FROM picked
WHERE items.id = picked.id
RETURNING items.*
$$;

-- Done, for many items of one tenant, each row fenced on its own token:
-- runtime role, tenant set for the function's run only. The fence is
-- claim_token = token AND lease_expires_at > now(); the items_claim_fields
-- CHECK makes a non-null token imply status = 'claimed', so the status test
-- is left out on purpose: with it the planner may answer the fence from the
-- partial index of claimed rows (a bitmap scan over every claimed row and its
-- dead entries) instead of one primary-key probe per id.
CREATE FUNCTION complete_items(p_tenant uuid, p_ids uuid[], p_tokens uuid[])
RETURNS SETOF uuid
LANGUAGE plpgsql
SET role = 'drover_runtime'
SET search_path FROM CURRENT
SET drover.tenant_id = ''
AS $$
BEGIN
    PERFORM set_config('drover.tenant_id', p_tenant::text, true);
    RETURN QUERY
    UPDATE items
    SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    FROM unnest(p_ids, p_tokens) AS c(id, token)
    WHERE items.id = c.id
      AND items.claim_token = c.token
      AND items.lease_expires_at > now()
    RETURNING items.id;
END
$$;

REVOKE ALL ON FUNCTION claim_items(text, text[], text, float8, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION complete_items(uuid, uuid[], uuid[]) FROM PUBLIC;
