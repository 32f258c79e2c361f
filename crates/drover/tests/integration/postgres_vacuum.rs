//! The paced vacuum on PostgreSQL: churned items leave dead tuples that
//! one run vacuums away; with an old snapshot held open the vacuum can
//! reclaim nothing, so the table backs off instead of being vacuumed on
//! every check, and is vacuumed and reclaimed once the snapshot is gone; a
//! login that does not own the tables is refused with `Forbidden`.
//!
//! The two tests that vacuum run each on a throwaway cluster of its own
//! (`drover::testing::cluster`, autovacuum off as on the shared server):
//! on the shared server any other test's open snapshot would keep their
//! vacuum from reclaiming, so they once had to have the machine to
//! themselves. They churn through a store of their own and close it, so
//! its backends exit and flush their statistics at once instead of after
//! ten idle seconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::item::NewItem;
use drover::queue::Principal;
use drover::store::Store;
use drover::store::postgres::{PgOptions, PgStore};
use drover::testing::cluster::Cluster;
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url, url_as};
use drover::vacuum::{VacuumConfig, VacuumStore, Vacuumer};
use drover::{ErrorKind, Queue};
use serde_json::json;
use sqlx::{Connection, Row};

const THRESHOLD: u64 = 1_000;

fn config() -> VacuumConfig {
    VacuumConfig {
        check_every: Duration::from_millis(500),
        dead_threshold: THRESHOLD,
        dead_ratio: 0.0,
        backoff_max: Duration::from_secs(2),
    }
}

/// Enqueues, claims and completes `n` items through the Queue API: two
/// dead row versions each (the claim's update, the completion's).
async fn churn(q: &Queue, n: usize) {
    for chunk in 0..n.div_ceil(500) {
        let items: Vec<NewItem> = (0..500)
            .map(|i| NewItem::new("vacuum.churn", json!({"c": chunk, "i": i})))
            .collect();
        q.enqueue_many(&Principal::system(), items).await.unwrap();
        let batch = q
            .claim("default", &[], "w", Duration::from_secs(60), 500)
            .await
            .unwrap();
        assert_eq!(batch.items.len(), 500);
        let refs: Vec<_> = batch.items.iter().collect();
        let done = q.complete_many(&refs).await.unwrap();
        assert_eq!(done.len(), 500);
    }
}

/// `items`'s statistics as `pg_stat_user_tables` shows them now, summed
/// over its partitions (migration 0026).
struct ItemsStats {
    inserts: i64,
    updates: i64,
    dead: i64,
    vacuums: i64,
}

async fn stats_now(conn: &mut sqlx::PgConnection, schema: &str) -> ItemsStats {
    let row = sqlx::query(
        "SELECT coalesce(sum(s.n_tup_ins), 0)::bigint, coalesce(sum(s.n_tup_upd), 0)::bigint, \
                coalesce(sum(s.n_dead_tup), 0)::bigint, coalesce(sum(s.vacuum_count), 0)::bigint \
         FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid \
         WHERE s.schemaname = $1 AND i.inhparent = format('%I.items', $1::text)::regclass",
    )
    .bind(schema)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    ItemsStats {
        inserts: row.get(0),
        updates: row.get(1),
        dead: row.get(2),
        vacuums: row.get(3),
    }
}

/// `items`'s dead tuples and vacuums now.
async fn items_stats(conn: &mut sqlx::PgConnection, schema: &str) -> (i64, i64) {
    let s = stats_now(conn, schema).await;
    (s.dead, s.vacuums)
}

/// Waits until every backend that churned `n` items has flushed its
/// counts for `items` (a backend flushes a table's inserts, updates and
/// dead tuples together, within seconds of going idle): the statistics
/// show the churn's `n` inserts and `2n` updates. Reading only "enough
/// dead tuples" let a late flush land after the vacuum had zeroed the
/// count, and the next run saw thousands of dead tuples that were gone.
/// Returns the dead tuples then.
async fn churn_flushed(conn: &mut sqlx::PgConnection, schema: &str, n: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = stats_now(conn, schema).await;
        if s.inserts >= n && s.updates >= 2 * n {
            return s.dead;
        }
        assert!(
            Instant::now() < deadline,
            "the churn's counts never all showed: {} of {n} inserts, {} of {} updates",
            s.inserts,
            s.updates,
            2 * n
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A throwaway cluster with drover migrated into `SCHEMA`, its store, and
/// a superuser connection to read the statistics.
struct Own {
    cluster: Cluster,
    store: Arc<PgStore>,
    stats: sqlx::PgConnection,
}

const SCHEMA: &str = "drover";

async fn connect(url: &str) -> PgStore {
    let opts = PgOptions {
        schema: SCHEMA.to_owned(),
        max_connections: 4,
        ..PgOptions::default()
    };
    PgStore::connect(url, opts).await.expect("store")
}

async fn own_cluster() -> Own {
    let cluster = tokio::task::spawn_blocking(Cluster::start)
        .await
        .unwrap()
        .expect("throwaway cluster");
    let store = connect(&cluster.url()).await;
    store.migrate().await.expect("migrate");
    let stats = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    Own {
        cluster,
        store: Arc::new(store),
        stats,
    }
}

impl Own {
    /// Churns `n` items through a store of its own, closed afterwards: its
    /// backends exit and flush their counts, which are then all read.
    async fn churn(&mut self, n: usize) -> i64 {
        let churner = connect(&self.cluster.url()).await;
        let pool = churner.pool().clone();
        churn(&Queue::new(Arc::new(churner) as Arc<dyn Store>), n).await;
        pool.close().await;
        churn_flushed(&mut self.stats, SCHEMA, n as i64).await
    }
}

#[tokio::test]
async fn a_run_vacuums_the_churned_items_and_reclaims_them() {
    let mut own = own_cluster().await;
    let queue = Queue::new(own.store.clone() as Arc<dyn Store>);
    let dead = own.churn(3_000).await;
    assert!(dead as u64 >= THRESHOLD, "{dead} dead tuples");
    let (_, vacuums_before) = items_stats(&mut own.stats, SCHEMA).await;

    let vacuumer = Vacuumer::new(queue.clone(), config()).unwrap();
    let report = vacuumer.run_once().await.unwrap();
    let items = report
        .outcome("items_default")
        .unwrap_or_else(|| panic!("items not vacuumed: {report:?}"));
    assert!(items.dead_before >= THRESHOLD, "{items:?}");
    assert!(items.reclaimed, "{items:?}");
    assert!(items.dead_after * 2 <= items.dead_before, "{items:?}");
    let (dead_now, vacuums_after) = items_stats(&mut own.stats, SCHEMA).await;
    assert!(vacuums_after > vacuums_before, "vacuum_count did not go up");
    assert!(dead_now < dead, "dead tuples {dead} -> {dead_now}");
    assert!(
        report
            .garbage
            .iter()
            .any(|g| g.table == "items_default" && g.dead >= THRESHOLD),
        "the garbage was read before the vacuum: {:?}",
        report.garbage
    );
    // Under the threshold now: the next run vacuums nothing.
    let again = vacuumer.run_once().await.unwrap();
    assert!(again.outcome("items_default").is_none(), "{again:?}");
    own.stats.close().await.unwrap();
}

#[tokio::test]
async fn a_held_snapshot_backs_the_table_off_until_it_is_gone() {
    let mut own = own_cluster().await;
    let queue = Queue::new(own.store.clone() as Arc<dyn Store>);
    // An old snapshot: nothing that dies after it may be removed.
    let mut holder = sqlx::PgConnection::connect(&own.cluster.url())
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;")
        .execute(&mut holder)
        .await
        .unwrap();
    own.churn(3_000).await;

    let vacuumer = Vacuumer::new(queue.clone(), config()).unwrap();
    let first = vacuumer.run_once().await.unwrap();
    let items = first
        .outcome("items_default")
        .unwrap_or_else(|| panic!("items not vacuumed: {first:?}"));
    assert!(
        !items.reclaimed,
        "the held snapshot kept the tuples: {items:?}"
    );
    let (_, vacuums) = items_stats(&mut own.stats, SCHEMA).await;

    let second = vacuumer.run_once().await.unwrap();
    assert!(
        second.outcome("items_default").is_none(),
        "vacuumed again at once: {second:?}"
    );
    assert!(
        second.backed_off.contains(&"items_default".to_owned()),
        "{second:?}"
    );
    assert_eq!(
        items_stats(&mut own.stats, SCHEMA).await.1,
        vacuums,
        "a backed-off table is not vacuumed"
    );

    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    // Once the backoff (2 s at most) has passed, the next run vacuums and
    // reclaims.
    let deadline = Instant::now() + Duration::from_secs(20);
    let outcome = loop {
        let r = vacuumer.run_once().await.unwrap();
        if let Some(o) = r.outcome("items_default") {
            break o.clone();
        }
        assert!(
            r.backed_off.contains(&"items_default".to_owned()),
            "neither vacuumed nor backed off: {r:?}"
        );
        assert!(Instant::now() < deadline, "never vacuumed again: {r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(outcome.reclaimed, "{outcome:?}");
    assert!(outcome.dead_after * 2 <= outcome.dead_before, "{outcome:?}");

    holder.close().await.unwrap();
    own.stats.close().await.unwrap();
}

#[tokio::test]
async fn a_login_that_does_not_own_the_tables_is_forbidden() {
    let (store, schema) = pg_fresh_store().await;
    let admin_url = pg_url().await;
    let login = format!("{schema}_ro");
    let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
    let row = sqlx::query(&format!(
        "SELECT runtime_role::text, system_role::text FROM \"{schema}\".drover_roles()"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    let (runtime, system): (String, String) = (row.get(0), row.get(1));
    sqlx::raw_sql(&format!(
        "CREATE ROLE \"{login}\" LOGIN; GRANT \"{runtime}\", \"{system}\" TO \"{login}\";"
    ))
    .execute(&mut admin)
    .await
    .unwrap();

    let other = PgStore::connect(
        &url_as(&admin_url, &login),
        PgOptions {
            schema: schema.clone(),
            max_connections: 2,
            ..PgOptions::default()
        },
    )
    .await
    .unwrap();
    // It may read the garbage, not vacuum.
    assert!(
        other
            .table_garbage()
            .await
            .unwrap()
            .iter()
            .any(|g| g.table == "items")
    );
    let e = other.table_vacuum("items").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");
    // The service logs it and stops trying that table.
    let vacuumer = Vacuumer::new(
        Queue::new(Arc::new(other) as Arc<dyn Store>),
        VacuumConfig {
            dead_threshold: 1,
            ..config()
        },
    )
    .unwrap();
    churn(&Queue::new(store.clone() as Arc<dyn Store>), 500).await;
    // Closed: its backends exit and flush their counts at once.
    store.pool().close().await;
    let mut conn = sqlx::PgConnection::connect(&admin_url).await.unwrap();
    // Some dead tuples to be tempted by (the threshold is 1).
    let deadline = Instant::now() + Duration::from_secs(60);
    while items_stats(&mut conn, &schema).await.0 < 1 {
        assert!(Instant::now() < deadline, "items never showed a dead tuple");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..2 {
        let r = vacuumer.run_once().await.unwrap();
        assert!(r.forbidden.contains(&"items_default".to_owned()), "{r:?}");
        assert!(r.outcome("items_default").is_none(), "{r:?}");
        assert!(r.errors.is_empty(), "{r:?}");
    }
    drop(vacuumer);

    conn.close().await.unwrap();
    pg_drop_schema(&admin_url, &schema).await;
    // Cleanup: logged, never a failure.
    if let Err(e) = sqlx::raw_sql(&format!("DROP ROLE IF EXISTS \"{login}\""))
        .execute(&mut admin)
        .await
    {
        eprintln!("dropping {login}: {e}");
    }
    admin.close().await.unwrap();
}
