-- drover 0005: roles named per installation.
--
-- 0001 created drover_runtime and drover_system once per cluster, so every
-- drover schema of every database on the cluster shared them: a login
-- granted drover_runtime for one application's queue reached every other
-- application's rows too. From here each installation (database + schema)
-- has a pair of its own, and the shared pair keeps no privilege here.
--
-- The names, stable and documented (docs/design.md, README):
--   <base>_runtime and <base>_system, where
--   <base> = left(schema, 42) || '_' || left(md5(database || '/' || schema), 12)
-- at most 42 + 1 + 12 + 8 = 63 bytes, PostgreSQL's identifier limit. The
-- hash covers the whole database and schema names, so a truncated schema
-- name or the same schema in two databases still gets a pair of its own.
-- drover_roles() below answers them; the store reads them from it.
--
-- Runs as the installation's owner: a superuser, or a login with CREATEROLE
-- and CREATE on the database. The owner becomes a member of both roles (the
-- simple one-login default, and PostgreSQL checks membership when a
-- function's SET role is created or altered). Other logins get a role only
-- when an operator grants it (`drover migrate --runtime-login/--system-login`).
--
-- Every step below is written against the catalog rather than a list of
-- objects, so it also moves whatever an earlier migration granted to the
-- shared pair.
--
-- Left as they were: 0001 still creates the shared pair and grants it to
-- the migrating login, and 0002/0003 still name it (rewriting an applied
-- migration would change its recorded checksum). On PostgreSQL 16+ that
-- grant fails for a non-superuser owner when another owner created the
-- pair; the cure is a baseline rewrite of 0001-0003 without it.

DO $$
DECLARE
    v_base text := left(current_schema(), 42) || '_'
                   || left(md5(current_database() || '/' || current_schema()), 12);
    v_rt   text := v_base || '_runtime';
    v_sys  text := v_base || '_system';
    r      record;
BEGIN
    -- Two migrations of one installation are serialized by the migrator's
    -- lock; a role left by an earlier, dropped copy of this schema is reused.
    BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB', v_rt);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB', v_sys);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    IF NOT pg_has_role(current_user, v_rt, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', v_rt, current_user);
    END IF;
    IF NOT pg_has_role(current_user, v_sys, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', v_sys, current_user);
    END IF;

    -- Policies: the runtime policies to the runtime role, the system ones to
    -- the system role.
    FOR r IN
        SELECT p.polname, c.relname, p.polroles
        FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
        WHERE c.relnamespace = current_schema()::regnamespace
    LOOP
        IF 'drover_runtime' = ANY (SELECT rolname FROM pg_roles WHERE oid = ANY (r.polroles)) THEN
            EXECUTE format('ALTER POLICY %I ON %I TO %I', r.polname, r.relname, v_rt);
        ELSIF 'drover_system' = ANY (SELECT rolname FROM pg_roles WHERE oid = ANY (r.polroles)) THEN
            EXECUTE format('ALTER POLICY %I ON %I TO %I', r.polname, r.relname, v_sys);
        END IF;
    END LOOP;

    -- Table and sequence privileges: each of the shared pair's grants given
    -- to the installation's role of the same duty, then taken back.
    FOR r IN
        SELECT c.relname, c.relkind, a.privilege_type, g.rolname AS grantee
        FROM pg_class c
        CROSS JOIN LATERAL aclexplode(c.relacl) a
        JOIN pg_roles g ON g.oid = a.grantee
        WHERE c.relnamespace = current_schema()::regnamespace
          AND g.rolname IN ('drover_runtime', 'drover_system')
    LOOP
        EXECUTE format('GRANT %s ON %s %I TO %I',
            r.privilege_type,
            CASE WHEN r.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
            r.relname,
            CASE WHEN r.grantee = 'drover_runtime' THEN v_rt ELSE v_sys END);
        EXECUTE format('REVOKE ALL ON %s %I FROM %I',
            CASE WHEN r.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
            r.relname, r.grantee);
    END LOOP;

    -- Functions that switch role: to this installation's role of the same
    -- duty, executable by that role (and so by the logins granted it) only.
    FOR r IN
        SELECT p.oid::regprocedure AS sig, cfg
        FROM pg_proc p CROSS JOIN LATERAL unnest(p.proconfig) AS cfg
        WHERE p.pronamespace = current_schema()::regnamespace
          AND cfg IN ('role=drover_runtime', 'role=drover_system')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET role = %I', r.sig,
            CASE WHEN r.cfg = 'role=drover_runtime' THEN v_rt ELSE v_sys END);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.sig);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r.sig,
            CASE WHEN r.cfg = 'role=drover_runtime' THEN v_rt ELSE v_sys END);
    END LOOP;

    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I', current_schema(), v_rt, v_sys);
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'drover_runtime') THEN
        EXECUTE format('REVOKE ALL ON SCHEMA %I FROM drover_runtime', current_schema());
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'drover_system') THEN
        EXECUTE format('REVOKE ALL ON SCHEMA %I FROM drover_system', current_schema());
    END IF;

    -- The names, for the store and for later migrations (which grant with
    -- EXECUTE format(..., (SELECT runtime_role FROM drover_roles()))).
    EXECUTE format(
        'CREATE FUNCTION drover_roles(OUT runtime_role text, OUT system_role text) '
        'LANGUAGE sql IMMUTABLE AS $f$ SELECT %L::text, %L::text $f$',
        v_rt, v_sys);
END $$;

-- Anyone who may use the schema may learn the names; they are not secrets.
GRANT EXECUTE ON FUNCTION drover_roles() TO PUBLIC;
