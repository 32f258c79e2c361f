-- Every checkpoint across tenants (system role), by reconciler then tenant.
SELECT * FROM sync_checkpoints ORDER BY reconciler, tenant_id
