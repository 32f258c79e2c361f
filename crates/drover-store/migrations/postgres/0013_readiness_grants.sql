-- drover 0013: `/readyz` on a runtime-only login.
--
-- Readiness compares the migrations recorded in the migrator's own table
-- with the ones the binary embeds. A fleet that logs in with only the
-- runtime role (workers on the runtime login, cross-tenant work on a
-- separate system login, or none) could not read that table, so `/readyz`
-- answered 503 for ever. The roles still get no privilege on the table
-- itself (it is the owner's: what it records is the owner's business);
-- they may call this one function, which answers the versions and whether
-- each succeeded, and nothing else.
DO $$
DECLARE
    v_rt  text;
    v_sys text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    -- SECURITY DEFINER runs as the owner; the pinned search_path keeps a
    -- caller's objects from being resolved in its place.
    EXECUTE format(
        $f$CREATE FUNCTION drover_migration_versions()
           RETURNS TABLE (version bigint, success boolean)
           LANGUAGE sql STABLE SECURITY DEFINER
           SET search_path = %I, pg_catalog
           AS 'SELECT version, success FROM _sqlx_migrations'$f$,
        current_schema());
    REVOKE ALL ON FUNCTION drover_migration_versions() FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION drover_migration_versions() TO %I, %I', v_rt, v_sys);
END
$$;
