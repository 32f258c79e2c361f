-- Operator cancel of a pending or claimed item, audited with actor $2, who also signs
-- updated_by (an operator's write, not the system's).
WITH upd AS (
    UPDATE items
    SET status = 'cancelled', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        updated_at = now(), updated_by = $2
    WHERE id = $1 AND status IN ('pending', 'claimed')
    RETURNING *
), audited AS (
    INSERT INTO audit (tenant_id, item_id, action, actor, detail)
    SELECT tenant_id, id, 'cancel', $2, NULL FROM upd
)
SELECT * FROM upd
