-- An item's open count and batch. ?1 tenant, ?2 item.
SELECT (SELECT deps_left FROM item_waits WHERE tenant_id = ?1 AND item_id = ?2) AS waiting_on,
       (SELECT batch_id FROM batch_members WHERE tenant_id = ?1 AND item_id = ?2) AS batch
