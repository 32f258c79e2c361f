-- Records newest first; each filter is skipped when NULL. Runtime role for
-- one tenant (RLS), system role across tenants.
SELECT * FROM orchestrations
WHERE ($1::uuid IS NULL OR tenant_id = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR kind = $3)
ORDER BY created_at DESC, id DESC
LIMIT $4
