-- Operator cancel of a pending, claimed or dead-lettered item, audited with
-- actor $2, who also signs updated_by (an operator's write, not the
-- system's). Cancelling a dead letter discards it (an ordered group that
-- holds on a dead letter goes on). Such a row leaves the final status
-- `failed`, so a line for the count rollup records what it was (migration
-- 0020; the next settlement consumes it), as a retry's does.
WITH prior AS (
    SELECT id, status, updated_at
    FROM items
    WHERE id = $1 AND status IN ('pending', 'claimed', 'failed')
    FOR UPDATE
), upd AS (
    UPDATE items
    SET status = 'cancelled', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        updated_at = now(), updated_by = $2
    FROM prior
    WHERE items.id = prior.id AND items.status IN ('pending', 'claimed', 'failed')
    RETURNING items.*, prior.status AS prior_status, prior.updated_at AS prior_updated_at
), unfinal AS (
    INSERT INTO item_counts_unfinal (tenant_id, lane, kind, status, was_updated_at)
    SELECT tenant_id, lane, kind, prior_status, prior_updated_at FROM upd
    WHERE prior_status = 'failed'
), audited AS (
    INSERT INTO audit (tenant_id, item_id, action, actor, detail)
    SELECT tenant_id, id, 'cancel', $2, NULL FROM upd
)
SELECT * FROM upd
