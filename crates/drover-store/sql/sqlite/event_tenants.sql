-- System: the tenants whose log holds an event, after ?1 (NULL: from the
-- first), at most ?2, in tenant order (a page of a cursor).
SELECT tenant_id FROM event_heads
WHERE head > 0 AND (?1 IS NULL OR tenant_id > ?1)
ORDER BY tenant_id LIMIT ?2
