//! Dependencies and batches through the queue API: the typed builder's
//! `.after(..)`, `.on_dependency_failure(..)`, `.batch(..)`; a DAG in one
//! call inside the caller's transaction (SQLite's neutral `Tx`, rolled back
//! then committed); a handler's look-up of its dependencies and their
//! typed results; batches.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{BatchSpec, Kind, Principal, Queue, Returns};
use drover::store::Store;
use drover::store::links::{AfterPolicy, BatchWhen};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::{NewItem, Status};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Step {
    n: u32,
}

impl Kind for Step {
    const NAME: &'static str = "step";
}

async fn claim_ids(queue: &Queue) -> Vec<Uuid> {
    let batch = queue
        .claim("default", &[], "w", Duration::from_secs(60), 100)
        .await
        .expect("claim");
    let mut ids: Vec<Uuid> = batch.items.iter().map(|cx| cx.id()).collect();
    for cx in &batch.items {
        queue.complete(cx).await.expect("complete");
    }
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn typed_builder_waits_and_a_handler_sees_its_dependencies() {
    let queue = Queue::memory();
    let a = queue.enqueue(Step { n: 1 }).await.unwrap().item;
    let b = queue.enqueue(Step { n: 2 }).await.unwrap().item;
    let c = queue
        .enqueue(Step { n: 3 })
        .after([a.id, b.id])
        .on_dependency_failure(AfterPolicy::Run)
        .await
        .unwrap()
        .item;
    let links = queue.links(c.tenant_id, c.id).await.unwrap();
    assert_eq!(links.waiting_on, 2);
    assert_eq!(links.after_policy, Some(AfterPolicy::Run));

    let mut first = vec![a.id, b.id];
    first.sort_unstable();
    assert_eq!(claim_ids(&queue).await, first);
    let batch = queue
        .claim("default", &[], "w", Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(batch.items.len(), 1);
    let deps = batch.items[0].dependencies(&queue).await.unwrap();
    assert_eq!(deps.iter().map(|d| d.id).collect::<Vec<_>>(), first);
    assert!(deps.iter().all(|d| d.status == Status::Done), "{deps:?}");
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Counted {
    rows: u32,
}

impl Returns for Step {
    type Output = Counted;
}

#[derive(Serialize, Deserialize)]
struct Other;

impl Kind for Other {
    const NAME: &'static str = "other";
}

/// A dependant's handler reads what its dependencies returned, typed by
/// their kind; a dependency of another kind is left to `dependencies`.
#[tokio::test]
async fn a_handler_reads_its_dependencies_typed_results() {
    let queue = Queue::memory();
    let a = queue.enqueue(Step { n: 1 }).await.unwrap().item;
    let b = queue.enqueue(Step { n: 2 }).await.unwrap().item;
    let o = queue.enqueue(Other).await.unwrap().item;
    let c = queue
        .enqueue(Step { n: 3 })
        .after([a.id, b.id, o.id])
        .await
        .unwrap()
        .item;
    let first = queue
        .claim("default", &[], "w", Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(first.items.len(), 3);
    for cx in &first.items {
        let out = (cx.id() == a.id).then(|| serde_json::json!({"rows": 7}));
        queue.complete_with(cx, out.as_ref()).await.unwrap();
    }
    let next = queue
        .claim("default", &[], "w", Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(next.items.len(), 1);
    assert_eq!(next.items[0].id(), c.id);
    let mut want = vec![(a.id, Some(Counted { rows: 7 })), (b.id, None)];
    want.sort_unstable_by_key(|w| w.0);
    assert_eq!(
        next.items[0]
            .dependency_results::<Step>(&queue)
            .await
            .unwrap(),
        want
    );
    let all = next.items[0].dependencies(&queue).await.unwrap();
    assert_eq!(all.len(), 3, "every dependency's row, any kind");
}

#[tokio::test]
async fn an_unknown_dependency_is_invalid_input() {
    let queue = Queue::memory();
    let err = queue
        .enqueue(Step { n: 1 })
        .after([Uuid::now_v7()])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), drover::ErrorKind::InvalidInput, "{err}");
}

#[tokio::test]
async fn sqlite_dag_in_the_callers_transaction_is_all_or_nothing() {
    let path = std::env::temp_dir().join(format!("drover-links-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url, SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let queue = Queue::new(Arc::new(store.clone()));
    let system = Principal::system();

    let a = NewItem::new("step", serde_json::json!({}));
    let b = NewItem::new("step", serde_json::json!({})).with_after([a.id]);
    let mut tx = queue.begin().await.unwrap();
    queue
        .enqueue_dag_in(&mut tx, &system, vec![b.clone(), a.clone()])
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(
        queue
            .get(Uuid::nil(), a.id)
            .await
            .unwrap_err()
            .is_not_found()
    );

    let mut tx = queue.begin().await.unwrap();
    queue
        .enqueue_dag_in(&mut tx, &system, vec![b.clone(), a.clone()])
        .await
        .unwrap();
    // A refused DAG in the same transaction leaves the caller's
    // transaction usable and the first DAG in it.
    let bad = NewItem::new("step", serde_json::json!({})).with_after([Uuid::now_v7()]);
    let err = queue
        .enqueue_dag_in(&mut tx, &system, vec![bad])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), drover::ErrorKind::InvalidInput);
    tx.commit().await.unwrap();

    assert_eq!(claim_ids(&queue).await, vec![a.id]);
    assert_eq!(claim_ids(&queue).await, vec![b.id]);
    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn batch_through_the_queue_calls_back_once() {
    let queue = Queue::memory();
    let system = Principal::system();
    let id = Uuid::now_v7();
    let row = queue
        .batch_create(
            &system,
            BatchSpec::new(id, "report.ready")
                .lane("callbacks")
                .payload(serde_json::json!({"report": 7}))
                .when(BatchWhen::Always),
        )
        .await
        .unwrap();
    assert!(!row.sealed);
    for n in 0..3 {
        queue.enqueue(Step { n }).batch(id).await.unwrap();
    }
    queue.batch_seal(Uuid::nil(), id).await.unwrap();
    assert_eq!(claim_ids(&queue).await.len(), 3);
    let row = queue.batch(Uuid::nil(), id).await.unwrap();
    assert!(row.fired);
    assert_eq!(row.counts.done, 3);
    let cb = queue.get(Uuid::nil(), row.callback_id).await.unwrap();
    assert_eq!(cb.kind, "report.ready");
    assert_eq!(cb.lane, "callbacks");
    assert_eq!(cb.payload["payload"]["report"], 7);
    assert_eq!(cb.status, Status::Pending);
    let per = queue.batch_members(Uuid::nil(), id).await.unwrap();
    assert_eq!(per, vec![(Status::Done, 3)]);
}
