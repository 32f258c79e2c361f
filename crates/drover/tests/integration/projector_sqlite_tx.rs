//! On SQLite a projector's projection and its checkpoint commit together:
//! `apply` writes in the writer's transaction that moves the checkpoint, so
//! a batch that fails after some of its events were applied leaves neither
//! the projection rows nor the checkpoint moved, and a batch that lands
//! moves both. This is what makes SQLite's delivery exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state their expectations by panicking

use crate::sqlite_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use drover::events::{Event, EventStore, NewEvent};
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy, apply_failed,
};
use drover::store::Store;
use serde_json::json;
use sqlite_common::db;
use uuid::Uuid;

/// Inserts one row per event into `proj`, in the checkpoint's transaction;
/// refuses (after writing the rows before it) the event at `fail_at`.
struct Rows {
    fail_at: Arc<Mutex<Option<i64>>>,
}

#[async_trait]
impl Projector for Rows {
    fn name(&self) -> &str {
        "rows"
    }
    fn topics(&self) -> Vec<String> {
        vec![]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "never applied twice: the row lands in the checkpoint's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the rows, in the same file",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "not rebuilt in this test",
            lag: "read by the test after each pass",
        }
    }
    async fn apply(&self, e: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        if *self.fail_at.lock().unwrap() == Some(e.position) {
            return Err(apply_failed(
                "refused after the rows before it were written",
            ));
        }
        let conn = tx
            .sqlite()
            .expect("the SQLite store shares its transaction");
        sqlx::query("INSERT INTO proj (position) VALUES (?1)")
            .bind(e.position)
            .execute(conn)
            .await?;
        Ok(())
    }
    async fn reset(&self, _tenant: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn projection_and_checkpoint_commit_together() {
    let db = db().await;
    sqlx::query("CREATE TABLE proj (position INTEGER PRIMARY KEY)")
        .execute(db.store.writer())
        .await
        .unwrap();
    let tenant = Uuid::nil();
    db.store
        .event_append_many(&[NewEvent::new("t", json!({})), NewEvent::new("t", json!({}))])
        .await
        .unwrap();
    let fail_at = Arc::new(Mutex::new(Some(2)));
    let p = Rows {
        fail_at: Arc::clone(&fail_at),
    };
    let store: Arc<dyn Store> = Arc::new(db.store.clone());
    let runner = ProjectorRunner::new(
        Arc::clone(&store),
        Arc::new(p),
        ProjectorConfig {
            batch: 2,
            backoff_base: Duration::ZERO,
            ..ProjectorConfig::for_backend(store.backend())
        },
    )
    .unwrap();
    let rows = || async {
        sqlx::query_scalar::<_, i64>("SELECT position FROM proj ORDER BY position")
            .fetch_all(db.store.writer())
            .await
            .unwrap()
    };
    let checkpoint = || async {
        store
            .projector_checkpoints(Some("rows"))
            .await
            .unwrap()
            .iter()
            .find(|r| r.tenant == tenant)
            .map_or(0, |r| r.position)
    };

    // Event 1's row was written in the batch's transaction, then event 2
    // failed: the row and the checkpoint's move roll back together.
    let r = runner.run_once().await.unwrap();
    assert_eq!(r.failed, 1);
    assert_eq!(rows().await, Vec::<i64>::new(), "no projection row moved");
    assert_eq!(checkpoint().await, 0, "the checkpoint did not move");

    *fail_at.lock().unwrap() = None;
    let r = runner.run_once().await.unwrap();
    assert_eq!((r.failed, r.applied), (0, 2));
    assert_eq!(rows().await, vec![1, 2], "both rows, once each");
    assert_eq!(checkpoint().await, 2, "the checkpoint moved with them");
}

#[test]
fn sqlite_default_batch_is_small() {
    assert_eq!(
        ProjectorConfig::for_backend(drover::Backend::Sqlite).batch,
        drover::projector::PROJECTOR_BATCH_SQLITE_DEFAULT
    );
    const { assert!(drover::projector::PROJECTOR_BATCH_SQLITE_DEFAULT <= 50) };
}
