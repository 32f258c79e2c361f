-- A batch's members per current status. ?1 tenant, ?2 batch.
SELECT i.status, count(*) AS n
FROM batch_members m JOIN items i ON i.id = m.item_id
WHERE m.tenant_id = ?1 AND m.batch_id = ?2
GROUP BY i.status
ORDER BY i.status
