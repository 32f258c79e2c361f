-- Makes a final item pending now with a fresh budget (operator).
-- ?1 now, ?2 the operator (signs updated_by), ?3 tenant_id, ?4 id. A run
-- again from scratch: the old result goes, and the item gives up its active
-- key (an operator's retry is not an enqueue that key could refuse).
UPDATE items
SET status = 'pending', attempts = 0, available_at = ?1, result = NULL, active_key = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4 AND status IN ('done', 'failed', 'cancelled')
RETURNING *
