//! Row-level security and least privilege of the PostgreSQL schema, checked
//! from the database side with raw SQL: acting as the installation's runtime
//! role, a tenant cannot read, change, delete or create another tenant's
//! rows, and with no tenant set it sees and writes nothing; a runtime login
//! cannot become the system role nor reach another installation's rows; the
//! cluster-wide roles of old migrations hold nothing. Every installation here
//! is migrated by the non-superuser owner [`TEST_OWNER`].

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::sync::Arc;

use drover::item::NewItem;
use drover::store::postgres::{
    InstallationRoles, LEGACY_RUNTIME_ROLE, LEGACY_SYSTEM_ROLE, LoginGrants, PgOptions, PgStore,
};
use drover::store::{ClaimParams, ItemStore, Store};
use drover::testing::{TEST_OWNER, pg_drop_schema, pg_fresh_store, pg_owner_url, pg_url, url_as};
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// The installation's roles.
async fn roles(s: &PgStore) -> InstallationRoles {
    s.roles().await.unwrap().clone()
}

/// A connection as the owner acting as `schema`'s runtime role,
/// inside a transaction (so every setting ends with it).
async fn as_runtime(url: &str, schema: &str, tenant: Option<Uuid>) -> PgConnection {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let tenant_sql = tenant
        .map(|t| format!("SET LOCAL drover.tenant_id = '{t}';"))
        .unwrap_or_default();
    conn.execute(
        format!(
            "BEGIN; SET LOCAL search_path TO \"{schema}\"; {tenant_sql} \
             SELECT set_config('role', (SELECT runtime_role FROM drover_roles()), true)"
        )
        .as_str(),
    )
    .await
    .unwrap();
    conn
}

/// A fresh login (no password: the test server trusts), dropped by
/// [`drop_login`]. Created by the owner, which CREATEROLE allows.
async fn new_login(tag: &str) -> String {
    let name = format!("drover_l_{tag}_{}", Uuid::new_v4().simple());
    let mut owner = PgConnection::connect(&pg_owner_url().await).await.unwrap();
    owner
        .execute(format!("CREATE ROLE \"{name}\" LOGIN").as_str())
        .await
        .unwrap();
    name
}

async fn drop_login(name: &str) {
    let mut admin = PgConnection::connect(&pg_url().await).await.unwrap();
    admin
        .execute(format!("DROP ROLE IF EXISTS \"{name}\"").as_str())
        .await
        .unwrap();
}

/// A raw connection as `login` with `schema` on its search_path.
async fn connect_as(login: &str, schema: &str) -> PgConnection {
    let mut conn = PgConnection::connect(&url_as(&pg_url().await, login))
        .await
        .unwrap();
    conn.execute(format!("SET search_path TO \"{schema}\"").as_str())
        .await
        .unwrap();
    conn
}

const INSERT_AS: &str = "INSERT INTO items (id, tenant_id, kind, lane, payload, status, available_at, \
     max_attempts, created_by, created_at, updated_by) \
     VALUES ($1, $2, 'k', 'default', '{}', 'pending', now(), 5, $2, now(), $2)";

#[tokio::test]
async fn runtime_role_cannot_touch_another_tenants_rows() {
    let (s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let item_a = NewItem::new("k", json!({})).with_tenant(a);
    let item_b = NewItem::new("k", json!({})).with_tenant(b);
    s.item_insert(&item_a).await.unwrap();
    s.item_insert(&item_b).await.unwrap();

    let mut conn = as_runtime(&url, &schema, Some(a)).await;
    let visible: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM items")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(visible, vec![item_a.id], "only tenant A's row is visible");
    let n = sqlx::query("SELECT 1 FROM items WHERE id = $1")
        .bind(item_b.id)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(n.is_empty());
    let upd = sqlx::query("UPDATE items SET priority = 9 WHERE id = $1")
        .bind(item_b.id)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(upd.rows_affected(), 0);
    let del = sqlx::query("DELETE FROM items WHERE id = $1")
        .bind(item_b.id)
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(del.rows_affected(), 0);
    // Moving A's own row to tenant B is refused by WITH CHECK.
    let moved = sqlx::query("UPDATE items SET tenant_id = $1 WHERE id = $2")
        .bind(b)
        .bind(item_a.id)
        .execute(&mut conn)
        .await;
    assert!(moved.is_err(), "a row cannot be moved to another tenant");
    drop(conn);

    let mut conn = as_runtime(&url, &schema, Some(a)).await;
    let ins = sqlx::query(INSERT_AS)
        .bind(Uuid::new_v4())
        .bind(b)
        .execute(&mut conn)
        .await;
    let err = ins.unwrap_err().to_string();
    assert!(err.contains("row-level security"), "{err}");
    drop(conn);

    // B's row is unchanged.
    let got = s.item_get(b, item_b.id).await.unwrap().unwrap();
    assert_eq!(got.priority, 0);
    pg_drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn runtime_role_without_tenant_sees_and_writes_nothing() {
    let (s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    let t = Uuid::new_v4();
    s.item_insert(&NewItem::new("k", json!({})).with_tenant(t))
        .await
        .unwrap();
    s.item_insert(&NewItem::new("k", json!({}))).await.unwrap();

    let mut conn = as_runtime(&url, &schema, None).await;
    for table in ["items", "audit", "workers"] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table} visible without a tenant");
    }
    let ins = sqlx::query(INSERT_AS)
        .bind(Uuid::new_v4())
        .bind(Uuid::nil())
        .execute(&mut conn)
        .await;
    assert!(ins.is_err(), "insert without a tenant refused");
    pg_drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn runtime_role_cannot_truncate() {
    let (_s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    for table in [
        "items",
        "audit",
        "workers",
        "claim_floors",
        "orchestrations",
        "orchestration_signals",
        "schedules",
        "sync_checkpoints",
        "sync_records",
        "idempotency_markers",
        "api_tokens",
        "item_deps",
        "batches",
        "item_runs",
    ] {
        let mut conn = as_runtime(&url, &schema, Some(Uuid::new_v4())).await;
        let r = conn.execute(format!("TRUNCATE {table}").as_str()).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("permission denied"), "{table}: {err}");
    }
    // Nor may it rewrite the audit log.
    let mut conn = as_runtime(&url, &schema, Some(Uuid::new_v4())).await;
    assert!(conn.execute("UPDATE audit SET detail = 'x'").await.is_err());
    pg_drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn every_table_forces_rls_and_runtime_role_is_unprivileged() {
    let (s, schema) = pg_fresh_store().await;
    let r = roles(&s).await;
    let url = pg_url().await;
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let tables: Vec<(String, bool, bool)> = sqlx::query_as(
        "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let names: Vec<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "_sqlx_migrations",
            "api_tokens",
            "audit",
            "batch_members",
            "batches",
            "claim_floors",
            "event_heads",
            "event_slots",
            "events",
            "events_0",
            "events_1",
            "events_2",
            "events_3",
            "fair_group_passes",
            "fair_lanes",
            "fair_passes",
            "fair_weights",
            "flow_generation",
            "flow_limits",
            "idempotency_markers",
            "item_active_keys",
            "item_counts",
            "item_counts_mark",
            "item_counts_unfinal",
            "item_deps",
            "item_keys",
            "item_minutes",
            "item_runs",
            "item_waits",
            "items",
            "items_default",
            "items_legacy",
            "lane_states",
            "orchestration_signals",
            "orchestrations",
            "outbox",
            "outbox_0",
            "outbox_1",
            "outbox_2",
            "outbox_3",
            "outbox_ring",
            "projector_checkpoints",
            "projector_runners",
            "queue_waits",
            "rate_cells",
            "rate_limits",
            "schedules",
            "sweep_lease",
            "sync_checkpoints",
            "sync_records",
            "workers"
        ]
    );
    for (name, rls, force) in &tables {
        if name == "_sqlx_migrations" {
            // The migrator's bookkeeping: no tenant data, and neither drover
            // role may read or write it at all.
            continue;
        }
        assert!(rls, "{name}: row security not enabled");
        assert!(force, "{name}: row security not forced");
    }
    for role in [r.runtime.as_str(), r.system.as_str()] {
        assert!(role.len() <= 63, "{role}: longer than an identifier");
        let (sup, bypass): (bool, bool) =
            sqlx::query_as("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1")
                .bind(role)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert!(
            !sup && !bypass,
            "{role} must be neither superuser nor BYPASSRLS"
        );
        let can: bool = sqlx::query_scalar("SELECT has_table_privilege($1, $2, 'SELECT')")
            .bind(role)
            .bind(format!("\"{schema}\"._sqlx_migrations"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(!can, "{role} must not read the migrations table");
        // ... but may ask which migrations ran, for `/readyz`.
        let can: bool = sqlx::query_scalar("SELECT has_function_privilege($1, $2, 'EXECUTE')")
            .bind(role)
            .bind(format!("\"{schema}\".drover_migration_versions()"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(can, "{role} must be able to read the migration versions");
    }
    // The sweep lease is the system role's alone.
    let can: bool =
        sqlx::query_scalar("SELECT has_table_privilege('drover_runtime', $1, 'SELECT')")
            .bind(format!("\"{schema}\".sweep_lease"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(!can, "drover_runtime must not read the sweep lease");
    pg_drop_schema(&url, &schema).await;
}

/// The handover (migration 0045: completions, then the limited claim, in
/// one call) switches role and tenant for its own run only, as the claim
/// and completion functions do.
#[tokio::test]
async fn handover_function_leaves_no_role_or_tenant_behind() {
    use drover::store::limits::{LimitScope, LimitSource, LimitStore};
    let (s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let one = PgStore::from_pool(pool.clone(), &schema).unwrap();
    one.limit_set(
        &LimitScope::KindPerGroup("a".into()),
        LimitSource::Operator,
        1.into(),
        Uuid::nil(),
    )
    .await
    .unwrap();
    let tenant = Uuid::from_u128(0xA);
    for _ in 0..2 {
        s.item_insert(
            &NewItem::new("a", json!({}))
                .with_tenant(tenant)
                .with_group("g"),
        )
        .await
        .unwrap();
    }
    let params = ClaimParams {
        lane: "default".into(),
        kinds: vec![],
        worker_id: "w".into(),
        lease: std::time::Duration::from_secs(30),
        limit: 10,
    };
    let got = one.item_claim(&params).await.unwrap();
    assert_eq!(got.len(), 1, "one slot per group");
    let done = [drover::store::Completion {
        claim: drover::ClaimRef::of(&got[0]).unwrap(),
        result: None,
    }];
    let h = one.item_complete_then_claim(&done, &params).await.unwrap();
    assert_eq!(h.landed, vec![got[0].id]);
    assert_eq!(h.claimed.unwrap().len(), 1, "the group's next item");
    let (user, t): (String, Option<String>) =
        sqlx::query_as("SELECT current_user::text, current_setting('drover.tenant_id', true)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(user, TEST_OWNER);
    assert!(
        t.unwrap_or_default().is_empty(),
        "tenant leaked to the session"
    );
    pg_drop_schema(&url, &schema).await;
}

/// The one-round-trip claim and completion functions switch role and tenant
/// for their own run only: the pooled connection comes back as it was.
#[tokio::test]
async fn hot_path_functions_leave_no_role_or_tenant_behind() {
    let (s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let one = PgStore::from_pool(pool.clone(), &schema).unwrap();
    let tenant = Uuid::from_u128(0xA);
    s.item_insert(&NewItem::new("a", json!({})).with_tenant(tenant))
        .await
        .unwrap();
    let got = one
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: std::time::Duration::from_secs(30),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let landed = one
        .item_complete_many(&[drover::ClaimRef::of(&got[0]).unwrap()])
        .await
        .unwrap();
    assert_eq!(landed, vec![got[0].id]);
    let (user, t): (String, Option<String>) =
        sqlx::query_as("SELECT current_user::text, current_setting('drover.tenant_id', true)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(user, TEST_OWNER);
    assert!(
        t.unwrap_or_default().is_empty(),
        "tenant leaked to the session"
    );
    // The runtime role alone cannot call the system function.
    let mut rt = as_runtime(&url, &schema, Some(tenant)).await;
    let denied = rt
        .execute(
            format!("SELECT * FROM \"{schema}\".claim_items('default', '{{}}', 'x', 30, 10)")
                .as_str(),
        )
        .await;
    assert!(denied.is_err(), "runtime role claimed across tenants");
    drop(rt);
    pg_drop_schema(&url, &schema).await;
}

fn claim_all() -> ClaimParams {
    ClaimParams {
        lane: "default".into(),
        kinds: vec![],
        worker_id: "w".into(),
        lease: std::time::Duration::from_secs(30),
        limit: 100,
    }
}

/// Two installations on one cluster have roles of their own, and the
/// cluster-wide pair the first migrations created holds nothing on either.
#[tokio::test]
async fn installations_share_no_role_and_the_shared_pair_holds_nothing() {
    let (a, schema_a) = pg_fresh_store().await;
    let (b, schema_b) = pg_fresh_store().await;
    let (ra, rb) = (roles(&a).await, roles(&b).await);
    assert_ne!(ra.runtime, rb.runtime);
    assert_ne!(ra.system, rb.system);
    assert_ne!(ra.runtime, ra.system);
    for r in [&ra, &rb] {
        assert_ne!(r.runtime, LEGACY_RUNTIME_ROLE);
        assert_ne!(r.system, LEGACY_SYSTEM_ROLE);
    }
    let mut admin = PgConnection::connect(&pg_url().await).await.unwrap();
    for schema in [&schema_a, &schema_b] {
        for legacy in [LEGACY_RUNTIME_ROLE, LEGACY_SYSTEM_ROLE] {
            let (usage, items, audit, workers, claim): (bool, bool, bool, bool, bool) =
                sqlx::query_as(
                    "SELECT has_schema_privilege($1, $2, 'USAGE'), \
                            has_table_privilege($1, $2 || '.items', 'SELECT, INSERT, UPDATE, DELETE'), \
                            has_table_privilege($1, $2 || '.audit', 'SELECT, INSERT'), \
                            has_table_privilege($1, $2 || '.workers', 'SELECT, INSERT, UPDATE, DELETE'), \
                            has_function_privilege($1, $2 || '.claim_items(text, text[], text, float8, bigint)', 'EXECUTE')",
                )
                .bind(legacy)
                .bind(schema)
                .fetch_one(&mut admin)
                .await
                .unwrap();
            assert!(
                !(usage || items || audit || workers || claim),
                "{legacy} still holds a privilege on {schema}"
            );
        }
        let policies: Vec<String> = sqlx::query_scalar(
            "SELECT r::text FROM pg_policies, unnest(roles) AS r WHERE schemaname = $1",
        )
        .bind(schema)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        let own = if schema == &schema_a { &ra } else { &rb };
        // Every table's policies (items, audit, workers, the sweep lease, and
        // whatever later migrations add) name this installation's roles only.
        assert!(policies.len() >= 6, "{policies:?}");
        assert!(
            policies
                .iter()
                .all(|p| p == &own.runtime || p == &own.system),
            "{schema}: policies name {policies:?}"
        );
    }
    // Even the owner, a member of the shared pair since 0001, reads nothing
    // through it.
    let mut owner = PgConnection::connect(&pg_owner_url().await).await.unwrap();
    owner
        .execute(format!("BEGIN; SET LOCAL search_path TO \"{schema_a}\"; SET LOCAL ROLE {LEGACY_SYSTEM_ROLE}").as_str())
        .await
        .unwrap();
    let err = sqlx::query(&format!("SELECT count(*) FROM \"{schema_a}\".items"))
        .fetch_one(&mut owner)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("permission denied"), "{err}");
    drop(owner);
    let url = pg_url().await;
    pg_drop_schema(&url, &schema_a).await;
    pg_drop_schema(&url, &schema_b).await;
}

/// A login granted only the runtime role: `SET ROLE` to the system role (its
/// own installation's, another's, or the old shared one) is refused, the
/// claim function is refused, and it sees one tenant's rows of its own
/// installation and nothing of another installation.
#[tokio::test]
async fn runtime_login_cannot_become_system_nor_see_other_tenants_or_installations() {
    let (a, schema_a) = pg_fresh_store().await;
    let (b, schema_b) = pg_fresh_store().await;
    let (ra, rb) = (roles(&a).await, roles(&b).await);
    let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
    let a_t = NewItem::new("k", json!({})).with_tenant(t);
    let a_u = NewItem::new("k", json!({})).with_tenant(u);
    let b_t = NewItem::new("k", json!({})).with_tenant(t);
    a.item_insert(&a_t).await.unwrap();
    a.item_insert(&a_u).await.unwrap();
    b.item_insert(&b_t).await.unwrap();
    let login = new_login("rt").await;
    a.grant_logins(&LoginGrants {
        runtime: vec![login.clone()],
        system: vec![],
    })
    .await
    .unwrap();

    let mut c = connect_as(&login, &schema_a).await;
    for role in [
        ra.system.as_str(),
        rb.system.as_str(),
        rb.runtime.as_str(),
        LEGACY_SYSTEM_ROLE,
        LEGACY_RUNTIME_ROLE,
    ] {
        let err = c
            .execute(format!("SET ROLE \"{role}\"").as_str())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("permission denied"), "SET ROLE {role}: {err}");
    }
    let err = c
        .execute("SELECT * FROM claim_items('default', '{}', 'x', 30, 10)")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("permission denied"), "claim: {err}");

    // As itself, with no tenant set: nothing.
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM items")
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert_eq!(n, 0, "rows visible with no tenant set");
    // Under tenant t: only t's row of its own installation.
    c.execute(format!("BEGIN; SET LOCAL drover.tenant_id = '{t}'").as_str())
        .await
        .unwrap();
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM items")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(ids, vec![a_t.id]);
    // The other installation's rows, even the same tenant's, are out of reach.
    let err = sqlx::query(&format!("SELECT id FROM \"{schema_b}\".items"))
        .fetch_all(&mut c)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("permission denied"), "{err}");
    c.execute("ROLLBACK").await.unwrap();
    drop(c);

    drop_login(&login).await;
    let url = pg_url().await;
    pg_drop_schema(&url, &schema_a).await;
    pg_drop_schema(&url, &schema_b).await;
}

/// The two-login configuration runs the queue end to end: per-tenant calls
/// on the runtime login, the cross-tenant ones on the system login; the
/// runtime login alone can enqueue but not claim.
#[tokio::test]
async fn split_logins_run_the_queue_and_the_runtime_login_alone_cannot_claim() {
    let (owner, schema) = pg_fresh_store().await;
    let rt = new_login("rt").await;
    let sys = new_login("sys").await;
    owner
        .grant_logins(&LoginGrants {
            runtime: vec![rt.clone()],
            system: vec![sys.clone()],
        })
        .await
        .unwrap();
    let base = pg_url().await;
    let split = PgStore::connect(
        &url_as(&base, &rt),
        PgOptions {
            schema: schema.clone(),
            max_connections: 2,
            system_url: Some(url_as(&base, &sys)),
            ..PgOptions::default()
        },
    )
    .await
    .unwrap();
    let item = NewItem::new("k", json!({})).with_tenant(Uuid::new_v4());
    split.item_insert(&item).await.unwrap();
    let got = split.item_claim(&claim_all()).await.unwrap();
    assert_eq!(got.len(), 1);
    split
        .item_complete(&drover::ClaimRef::of(&got[0]).unwrap())
        .await
        .unwrap();
    assert_eq!(split.counts().await.unwrap().len(), 1);
    assert_eq!(split.gauges().await.unwrap().failed, 0);

    let runtime_only = Arc::new(
        PgStore::connect(
            &url_as(&base, &rt),
            PgOptions {
                schema: schema.clone(),
                max_connections: 2,
                ..PgOptions::default()
            },
        )
        .await
        .unwrap(),
    );
    runtime_only
        .item_insert(&NewItem::new("k", json!({})).with_tenant(Uuid::new_v4()))
        .await
        .unwrap();
    let err = runtime_only
        .item_claim(&claim_all())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("permission denied"), "{err}");
    assert!(
        runtime_only.counts().await.is_err(),
        "counts are cross-tenant"
    );
    // `/readyz` reads the migrator's table: a runtime-only fleet must see
    // its migrations as current, not fail readiness for ever.
    let status = runtime_only.migration_status().await.unwrap();
    assert!(status.is_current(), "{status}");
    drop((split, runtime_only));
    drop_login(&rt).await;
    drop_login(&sys).await;
    pg_drop_schema(&base, &schema).await;
}

#[tokio::test]
async fn grant_logins_refuses_a_runtime_login_holding_the_system_role() {
    let (s, schema) = pg_fresh_store().await;
    let login = new_login("both").await;
    s.grant_logins(&LoginGrants {
        runtime: vec![],
        system: vec![login.clone()],
    })
    .await
    .unwrap();
    let err = s
        .grant_logins(&LoginGrants {
            runtime: vec![login.clone()],
            system: vec![],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            drover::Error::InvalidInput {
                field: "runtime_login",
                ..
            }
        ),
        "{err}"
    );
    drop_login(&login).await;
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// The schedule rows belong to the nil tenant: a runtime transaction under
/// another tenant sees none and cannot move one.
#[tokio::test]
async fn schedule_rows_are_invisible_to_other_tenants() {
    use drover::periodic::{MisfirePolicy, ScheduleDecl, ScheduleStore};
    let (store, schema) = pg_fresh_store().await;
    let url = pg_url().await;
    store
        .schedule_upsert(&ScheduleDecl {
            name: "nightly".into(),
            cron: "0 3 * * *".into(),
            zone: "UTC".into(),
            kind: "report".into(),
            lane: "default".into(),
            misfire: MisfirePolicy::Once,
        })
        .await
        .unwrap();
    let mut other = as_runtime(&url, &schema, Some(Uuid::new_v4())).await;
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM schedules")
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(seen, 0, "another tenant sees no schedule row");
    let moved = other
        .execute("UPDATE schedules SET last_tick = now()")
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(moved, 0, "nor moves one");
    let mut nil = as_runtime(&url, &schema, Some(Uuid::nil())).await;
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM schedules")
        .fetch_one(&mut nil)
        .await
        .unwrap();
    assert_eq!(seen, 1, "the nil tenant, the scheduler's, sees it");
    // End both transactions, or the schema's drop waits on their locks.
    other.execute("ROLLBACK").await.unwrap();
    nil.execute("ROLLBACK").await.unwrap();
    pg_drop_schema(&url, &schema).await;
}

/// The run history (migration 0040) is tenant-scoped: a tenant's runtime
/// role sees only its own runs and cannot write one for another tenant.
#[tokio::test]
async fn item_runs_are_tenant_scoped() {
    let (s, schema) = pg_fresh_store().await;
    let url = pg_owner_url().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let item_b = NewItem::new("k", json!({})).with_tenant(b);
    s.item_insert(&item_b).await.unwrap();
    let got = s
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: std::time::Duration::from_secs(60),
            limit: 1,
        })
        .await
        .unwrap();
    let claim = drover::store::ClaimRef::of(&got[0]).unwrap();
    // Released, so the run is written (a first claim that ends done is
    // the item itself and writes none).
    s.item_release(&claim, None).await.unwrap();

    let mut conn = as_runtime(&url, &schema, Some(b)).await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM item_runs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 1, "tenant B sees its own run");
    drop(conn);
    let mut conn = as_runtime(&url, &schema, Some(a)).await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM item_runs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 0, "tenant A sees no run of B's");
    let ins = sqlx::query(
        "INSERT INTO item_runs (tenant_id, item_id, slot, claim_seq, started_at, finished_at, outcome) \
         VALUES ($1, $2, 0, 1, now(), now(), 'done')",
    )
    .bind(b)
    .bind(Uuid::new_v4())
    .execute(&mut conn)
    .await;
    let err = ins.unwrap_err().to_string();
    assert!(err.contains("row-level security"), "{err}");
    drop(conn);
    pg_drop_schema(&url, &schema).await;
}
