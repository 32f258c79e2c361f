-- One item's audit entries, oldest first. ?1 tenant_id, ?2 item_id.
SELECT tenant_id, item_id, action, actor, detail, at FROM audit
WHERE tenant_id = ?1 AND item_id = ?2
ORDER BY seq
