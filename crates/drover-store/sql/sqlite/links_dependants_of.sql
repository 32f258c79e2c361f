-- An item's dependants. ?1 tenant, ?2 item.
SELECT item_id FROM item_deps WHERE tenant_id = ?1 AND dep_id = ?2 ORDER BY item_id
