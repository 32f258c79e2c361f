-- A dependant enqueued with every dependency resolved: available at
-- once, or at the time it asked for. ?1 tenant, ?2 id, ?3 now.
UPDATE items
SET available_at = max(?3, coalesce((SELECT run_at FROM item_waits WHERE item_id = ?2), ?3))
WHERE tenant_id = ?1 AND id = ?2 AND status = 'pending' AND available_at = 253402214400000000
