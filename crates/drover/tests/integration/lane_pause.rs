//! Pausing a lane stops every worker claiming from it, and resuming it
//! lets the waiting items run, on the memory, SQLite and PostgreSQL stores.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::Store;
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{ErrorKind, NewItem, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tag {
    n: u32,
}

impl Kind for Tag {
    const NAME: &'static str = "test.tag";
}

/// Reports each item it runs: its lane and its payload's number.
#[derive(Clone)]
struct Report(mpsc::UnboundedSender<(String, u32)>);

impl Handler for Report {
    type Job = Tag;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: reports and does nothing else",
        retry: "queue default",
        checkpoint: "none: one step",
        recovery: "swept after the lease",
    };
    async fn handle(&self, cx: &JobContext, job: Tag) -> Outcome {
        let _ = self.0.send((cx.item().lane.clone(), job.n));
        Ok(Done::Completed)
    }
}

const POLL: Duration = Duration::from_millis(50);

fn settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 2,
        lanes: vec!["mail".into(), "bulk".into()],
        lease: Duration::from_secs(10),
        renew_interval: Duration::from_secs(1),
        renew_timeout: Duration::from_millis(500),
        heartbeat_interval: Duration::from_millis(200),
        poll_interval: POLL,
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

async fn enqueue(q: &Queue, lane: &str, n: u32) -> Uuid {
    let item = NewItem::new(Tag::NAME, json!({ "n": n })).with_lane(lane);
    q.enqueue_item(&Principal::system(), item)
        .await
        .expect("enqueue")
        .item
        .id
}

async fn next(rx: &mut mpsc::UnboundedReceiver<(String, u32)>) -> (String, u32) {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("an item ran in time")
        .expect("the handler is alive")
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < end {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The scenario every backend runs.
async fn pause_stops_claims_and_resume_restarts_them(store: Arc<dyn Store>) {
    let q = Queue::new(store);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Worker::builder(q.clone())
        .settings(settings())
        .handler(Report(tx))
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();

    // Running: an item of the lane runs.
    enqueue(&q, "mail", 1).await;
    assert_eq!(next(&mut rx).await, ("mail".into(), 1));

    // A tenant's operator may not pause a lane every tenant shares.
    let tenant_op = Principal::new(Uuid::from_u128(5), Uuid::from_u128(9), ["drover.operate"]);
    let refused = q.lane_pause(&tenant_op, "mail").await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Forbidden);
    let bad = q
        .lane_pause(&Principal::system(), "Not A Lane")
        .await
        .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidInput);

    let state = q.lane_pause(&Principal::system(), "mail").await.unwrap();
    assert!(state.paused);
    assert_eq!(q.lanes_paused().await.unwrap(), vec!["mail".to_owned()]);
    // Honoured within a poll interval: wait until this worker has seen it.
    wait_until("the worker sees the pause", || w.paused_lanes() == ["mail"]).await;

    // Enqueued after the pause was seen: the mail item waits, while the
    // bulk items enqueued after it run, each a full claim round later.
    let held = enqueue(&q, "mail", 2).await;
    for n in 10..13 {
        enqueue(&q, "bulk", n).await;
        assert_eq!(next(&mut rx).await, ("bulk".into(), n));
    }
    // Several more polls pass; the item must still wait, unclaimed.
    tokio::time::sleep(POLL * 4).await;
    let item = q.get(Uuid::nil(), held).await.unwrap();
    assert_eq!(item.status, Status::Pending, "no claim from a paused lane");
    assert_eq!(item.claim_seq, 0, "never claimed");
    assert!(rx.try_recv().is_err(), "nothing else ran");

    // Resume: the waiting item runs.
    let state = q.lane_resume(&Principal::system(), "mail").await.unwrap();
    assert!(!state.paused);
    assert_eq!(next(&mut rx).await, ("mail".into(), 2));
    assert!(w.paused_lanes().is_empty());
    assert!(q.lanes_paused().await.unwrap().is_empty());

    // A worker started on a paused lane never claims from it.
    w.shutdown().await;
    q.lane_pause(&Principal::system(), "bulk").await.unwrap();
    let held = enqueue(&q, "bulk", 20).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Worker::builder(q.clone())
        .settings(settings())
        .handler(Report(tx))
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    assert_eq!(w.paused_lanes(), ["bulk"], "read before the first claim");
    enqueue(&q, "mail", 21).await;
    assert_eq!(next(&mut rx).await, ("mail".into(), 21));
    tokio::time::sleep(POLL * 4).await;
    assert_eq!(
        q.get(Uuid::nil(), held).await.unwrap().status,
        Status::Pending
    );
    q.lane_resume(&Principal::system(), "bulk").await.unwrap();
    assert_eq!(next(&mut rx).await, ("bulk".into(), 20));
    w.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_pause_stops_claims_and_resume_restarts_them() {
    pause_stops_claims_and_resume_restarts_them(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_pause_stops_claims_and_resume_restarts_them() {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = std::env::temp_dir().join(format!("drover-lanes-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&dir.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    pause_stops_claims_and_resume_restarts_them(Arc::new(store)).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", dir.display()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_pause_stops_claims_and_resume_restarts_them() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    pause_stops_claims_and_resume_restarts_them(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}
