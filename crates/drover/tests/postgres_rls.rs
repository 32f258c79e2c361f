//! Row-level security of the PostgreSQL schema, checked from the database
//! side: acting as `drover_runtime` directly, a tenant cannot read, change,
//! delete or create another tenant's rows, and with no tenant set it sees
//! and writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use drover::item::NewItem;
use drover::store::Store;
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

/// A connection acting as the runtime role in `schema`, inside a transaction
/// (so every setting ends with it).
async fn as_runtime(url: &str, schema: &str, tenant: Option<Uuid>) -> PgConnection {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let tenant_sql = tenant
        .map(|t| format!("SET LOCAL drover.tenant_id = '{t}';"))
        .unwrap_or_default();
    conn.execute(
        format!("BEGIN; SET LOCAL search_path TO \"{schema}\"; SET LOCAL ROLE drover_runtime; {tenant_sql}").as_str(),
    )
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
    let url = pg_url().await;
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
    let url = pg_url().await;
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
    let url = pg_url().await;
    for table in ["items", "audit", "workers", "schedules"] {
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
    let (_s, schema) = pg_fresh_store().await;
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
        ["_sqlx_migrations", "audit", "items", "schedules", "workers"]
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
    for role in ["drover_runtime", "drover_system"] {
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
    }
    pg_drop_schema(&url, &schema).await;
}

/// The one-round-trip claim and completion functions switch role and tenant
/// for their own run only: the pooled connection comes back as it was.
#[tokio::test]
async fn hot_path_functions_leave_no_role_or_tenant_behind() {
    let (s, schema) = pg_fresh_store().await;
    let url = pg_url().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let one = drover::store::postgres::PgStore::from_pool(pool.clone(), &schema).unwrap();
    let tenant = Uuid::from_u128(0xA);
    s.item_insert(&NewItem::new("a", json!({})).with_tenant(tenant))
        .await
        .unwrap();
    let got = one
        .item_claim(&drover::store::ClaimParams {
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
    assert_eq!(user, "postgres");
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
