-- What ties one item to others (runtime role, the item's tenant).
SELECT (SELECT coalesce(array_agg(dep_id ORDER BY dep_id), '{}') FROM item_deps WHERE item_id = $1) AS after,
       (SELECT min(policy) FROM item_deps WHERE item_id = $1) AS policy,
       (SELECT deps_left FROM item_waits WHERE item_id = $1) AS waiting_on,
       (SELECT coalesce(array_agg(item_id ORDER BY item_id), '{}') FROM item_deps WHERE dep_id = $1) AS dependants,
       (SELECT batch_id FROM batch_members WHERE item_id = $1) AS batch
