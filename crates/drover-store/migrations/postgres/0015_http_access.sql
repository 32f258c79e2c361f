-- drover 0015: the HTTP API's tokens and idempotency markers.
--
-- api_tokens is a system table: a token is looked up by its hash before
-- any tenant is known, and an unscoped token spans tenants, so it has no
-- owning tenant (scope_tenant only confines what the token sees). RLS is
-- ENABLEd and FORCEd with a policy for the system role only; the runtime
-- role gets no grant. Only the SHA-256 of a token is stored.
--
-- idempotency_markers is tenant data: scoped by (tenant, principal, route,
-- key), written under the runtime role with the tenant set, purged by the
-- sweep once expired (system role).

CREATE TABLE api_tokens (
    id           uuid        PRIMARY KEY,
    hash         text        NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
    role         text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    scope_tenant uuid,
    enqueue      text[]      NOT NULL DEFAULT '{}',
    label        text        NOT NULL DEFAULT '' CHECK (octet_length(label) <= 256),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE TABLE idempotency_markers (
    tenant_id    uuid        NOT NULL,
    principal_id uuid        NOT NULL,
    route        text        NOT NULL CHECK (octet_length(route) BETWEEN 1 AND 256),
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    fingerprint  text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('in_flight', 'done')),
    status       integer     CHECK (status BETWEEN 100 AND 599),
    body         text,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    CONSTRAINT idempotency_markers_done_has_answer
        CHECK (state <> 'done' OR (status IS NOT NULL AND body IS NOT NULL)),
    PRIMARY KEY (tenant_id, principal_id, route, key)
);

-- The sweep's purge: expired markers by expiry.
CREATE INDEX idempotency_markers_expires ON idempotency_markers (expires_at);

ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_tokens FORCE ROW LEVEL SECURITY;
ALTER TABLE idempotency_markers ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_markers FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY api_tokens_system ON api_tokens TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON api_tokens TO %I', v_sys);
    EXECUTE format('CREATE POLICY idempotency_markers_runtime ON idempotency_markers TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY idempotency_markers_system ON idempotency_markers TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_markers TO %I', v_rt);
    EXECUTE format('GRANT SELECT, DELETE ON idempotency_markers TO %I', v_sys);
END
$$;
