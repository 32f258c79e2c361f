//! The projector apply rate on PostgreSQL and SQLite (the figure `drover
//! bench` reports): every event applied, the rate printed. Speed is
//! reported, never asserted.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::sync::Arc;

use drover::Store;
use drover::store::sqlite::{SqliteOptions, SqliteStore};

fn events() -> u64 {
    std::env::var("DROVER_BENCH_PROJECTOR_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projector_apply_rate_postgres() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let dyn_store: Arc<dyn Store> = store.clone();
    let f = drover_bench::projector_apply_rate(dyn_store, events(), 500)
        .await
        .expect("rate");
    println!(
        "postgres projector apply: {} events in {:?} = {:.0} events/s (batch {})",
        f.events, f.elapsed, f.events_per_sec, f.batch
    );
    assert_eq!(f.events, events());
    drop(store);
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projector_apply_rate_sqlite() {
    let dir = tempfile_dir();
    let url = format!("sqlite://{}", dir.join("bench.db").display());
    let store = SqliteStore::open(&url, SqliteOptions::default())
        .await
        .expect("open");
    store.migrate().await.expect("migrate");
    let f = drover_bench::projector_apply_rate(Arc::new(store), events(), 500)
        .await
        .expect("rate");
    println!(
        "sqlite projector apply: {} events in {:?} = {:.0} events/s (batch {})",
        f.events, f.elapsed, f.events_per_sec, f.batch
    );
    assert_eq!(f.events, events());
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("drover-projector-rate-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
