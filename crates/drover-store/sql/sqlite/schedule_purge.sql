-- Delete the tenant's rows no scheduler has seen since ?2.
DELETE FROM schedules WHERE tenant_id = ?1 AND seen_at < ?2
