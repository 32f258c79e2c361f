-- An item's dependencies and its policy. ?1 tenant, ?2 item.
SELECT dep_id, policy FROM item_deps WHERE tenant_id = ?1 AND item_id = ?2 ORDER BY dep_id
