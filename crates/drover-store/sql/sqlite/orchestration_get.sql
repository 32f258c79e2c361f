-- One record of a tenant. ?1 tenant, ?2 id.
SELECT * FROM orchestrations WHERE tenant_id = ?1 AND id = ?2
