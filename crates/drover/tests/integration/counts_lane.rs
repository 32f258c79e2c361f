//! Counts for one lane are read through indexes, never by scanning the
//! whole items table, on PostgreSQL and on SQLite (the plans are checked;
//! the rows themselves are held by the contract case `counts_of_one_lane`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use drover::store::Store;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use sqlx::Row;
use uuid::Uuid;

const PG_SQL: &str = include_str!("../../../drover-store/sql/postgres/counts.sql");
const SQLITE_SQL: &str = include_str!("../../../drover-store/sql/sqlite/counts_lane.sql");

#[tokio::test]
async fn postgres_counts_lane_plan_uses_indexes_not_a_table_scan() {
    let (store, schema) = pg_fresh_store().await;
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::query(&format!("SET LOCAL search_path = \"{schema}\""))
        .execute(&mut *tx)
        .await
        .unwrap();
    // An empty table is cheapest to scan: forbid the scan wherever an index
    // can answer, so the plan shows a scan only where no index can.
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let sql = PG_SQL
        .replace("$1::timestamptz", "now()")
        .replace("$2::text", "'default'::text")
        .replace("$2", "'default'");
    let plan: Vec<String> = sqlx::query(&format!("EXPLAIN {sql}"))
        .fetch_all(&mut *tx)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
    tx.rollback().await.unwrap();
    let plan = plan.join("\n");
    // The rollup's own small tables may be scanned; items never.
    assert!(!plan.contains("Seq Scan on items "), "{plan}");
    // items is partitioned (migration 0026): each partition's entry of an
    // index is named <partition>_claim and so on.
    // Pending rows through either partial index on them that leads with
    // the lane: the claim's, or fair share's (migration 0047; PostgreSQL
    // names each partition's entry of it after its columns).
    assert!(
        plan.contains("_claim ") || plan.contains("_lane_tenant_id_priority_available_at_idx "),
        "{plan}"
    );
    assert!(plan.contains("_final "), "{plan}");
    assert!(plan.contains("_tenant_stale "), "{plan}");
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn sqlite_counts_lane_plan_uses_indexes_not_a_table_scan() {
    let path = std::env::temp_dir().join(format!("drover-counts-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url, SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {SQLITE_SQL}"))
        .bind("default")
        .fetch_all(store.writer())
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect();
    let plan = plan.join("\n");
    assert!(
        !plan.lines().any(|l| l.trim() == "SCAN items"),
        "a full scan of items: {plan}"
    );
    // Final rows: the rollup, plus the range not folded in yet (migration
    // 0024); pending and claimed rows through their partial indexes.
    assert!(
        plan.contains("SEARCH item_counts USING PRIMARY KEY (lane=?)"),
        "{plan}"
    );
    assert!(
        plan.contains("items_final_updated (updated_at>?)"),
        "{plan}"
    );
    // Pending rows through either partial index on them that leads with
    // the lane: items_pending, or fair share's items_fair (migration 0047).
    assert!(
        plan.contains("items_pending (lane=?)") || plan.contains("items_fair (lane=?)"),
        "{plan}"
    );
    assert!(plan.contains("items_claimed_lease"), "{plan}");
    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}
