-- One item's audit entries, oldest first (under the tenant).
SELECT tenant_id, item_id, action, actor, detail, at
FROM audit
WHERE item_id = $1
ORDER BY at, id
