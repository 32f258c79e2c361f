//! Transactional enqueue through the queue API: the item exists if and only
//! if the caller's transaction commits, on PostgreSQL and on SQLite.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use drover::queue::{Kind, Queue};
use drover::store::Store;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct SendReceipt {
    order: u64,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "send_receipt";
}

#[tokio::test]
async fn postgres_enqueue_in_commits_or_vanishes_with_the_callers_write() {
    let (store, schema) = pg_fresh_store().await;
    let pool = store.pool().clone();
    let queue = Queue::new(store.clone());
    sqlx::query("SELECT 1").execute(&pool).await.ok();
    let mut wake = queue.store().wakeups().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let kept = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap();
    // The caller's role is untouched: it can still write its own rows.
    let role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(role, drover::testing::TEST_OWNER);
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let dropped = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 2 })
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert!(queue.get(Uuid::nil(), kept.item.id).await.is_ok());
    assert!(
        queue
            .get(Uuid::nil(), dropped.item.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    let lane = tokio::time::timeout(std::time::Duration::from_secs(5), wake.recv())
        .await
        .expect("a wake-up after the commit")
        .unwrap();
    assert_eq!(lane.lane, "default");
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn sqlite_enqueue_in_commits_or_vanishes_with_the_callers_write() {
    let path = std::env::temp_dir().join(format!("drover-tx-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = Arc::new(
        SqliteStore::open(&url, SqliteOptions::default())
            .await
            .unwrap(),
    );
    store.migrate().await.unwrap();
    let queue = Queue::new(store.clone());

    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let kept = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    queue.wake("default");

    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let dropped = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 2 })
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert!(queue.get(Uuid::nil(), kept.item.id).await.is_ok());
    assert!(
        queue
            .get(Uuid::nil(), dropped.item.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn a_connection_of_another_backend_is_refused() {
    let (store, schema) = pg_fresh_store().await;
    let pool = store.pool().clone();
    let memory_queue = Queue::memory();
    let mut tx = pool.begin().await.unwrap();
    let err = memory_queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), drover::ErrorKind::Config);
    tx.rollback().await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}
