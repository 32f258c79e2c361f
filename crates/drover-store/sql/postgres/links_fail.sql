-- Dependants enqueued after a dependency that already failed under policy
-- `fail`: dead-lettered at once (the trigger then finishes their own
-- dependants), with the audit entry of a dead letter.
WITH f AS (
    UPDATE items i
    SET status = 'failed', last_error = t.err,
        updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    FROM unnest($1::uuid[], $2::text[]) AS t(id, err)
    WHERE i.id = t.id AND i.status = 'pending'
    RETURNING i.tenant_id, i.id, i.last_error
)
INSERT INTO audit (tenant_id, item_id, action, actor, detail)
SELECT tenant_id, id, 'dead_letter', '00000000-0000-0000-0000-000000000000'::uuid, last_error FROM f
