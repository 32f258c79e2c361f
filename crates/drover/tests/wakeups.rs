//! An idle worker polling only every 30 s picks up an item another worker
//! released in under 100 ms: the release wakes it (on PostgreSQL by the
//! release statement's NOTIFY, sent from another store so only the NOTIFY
//! can reach the worker; on SQLite and memory by the in-process signal).
//!
//! 100 ms is the correctness bound for a wake-up that arrived (a poll would
//! take 30 s); a wake-up is normally a few milliseconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::queue::{JobContext, Kind, Principal};
use drover::store::postgres::{PgOptions, PgStore};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{NewItem, Queue, Store, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ping {
    n: u32,
}

impl Kind for Ping {
    const NAME: &'static str = "wake.ping";
}

/// Reports each start: which item, and when.
struct Started(mpsc::UnboundedSender<(Uuid, Instant)>);

impl Handler for Started {
    type Job = Ping;
    const STRATEGY: Strategy = Strategy {
        idempotency: "no side effects",
        retry: "default",
        recovery: "swept after its lease",
        checkpoint: "none: one short call, a rerun starts over",
    };
    async fn handle(&self, cx: &JobContext, _job: Ping) -> Outcome {
        let _ = self.0.send((cx.id(), Instant::now()));
        Ok(Done::Completed)
    }
}

/// The worker's store, and the store another worker releases through.
async fn stores(backend: &str) -> (Arc<dyn Store>, Arc<dyn Store>, Option<String>) {
    match backend {
        "memory" => {
            let s: Arc<dyn Store> = Arc::new(drover::store::memory::MemoryStore::new());
            (s.clone(), s, None)
        }
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("drover-wake-{}.db", Uuid::new_v4()));
            let s = SqliteStore::open(path.to_str().unwrap(), SqliteOptions::default())
                .await
                .unwrap();
            s.migrate().await.unwrap();
            let s: Arc<dyn Store> = Arc::new(s);
            (s.clone(), s, None)
        }
        "postgres" => {
            let (worker, schema) = pg_fresh_store().await;
            let other = PgStore::connect(
                &pg_url().await,
                PgOptions {
                    schema: schema.clone(),
                    max_connections: 2,
                    ..PgOptions::default()
                },
            )
            .await
            .unwrap();
            (worker, Arc::new(other), Some(schema))
        }
        other => panic!("unknown backend {other}"),
    }
}

async fn next_start(
    rx: &mut mpsc::UnboundedReceiver<(Uuid, Instant)>,
    what: &str,
) -> (Uuid, Instant) {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no start within 10 s (the poll is 30 s)"))
        .expect("handler channel open")
}

async fn released_item_is_picked_up_at_once(backend: &str) {
    let (worker_store, other_store, schema) = stores(backend).await;
    let other = Queue::new(other_store);
    // Another worker holds the item.
    let held = NewItem::new(Ping::NAME, serde_json::json!({"n": 0}));
    let held_id = held.id;
    other
        .enqueue_many(&Principal::system(), vec![held])
        .await
        .unwrap();
    let mut batch = other
        .claim("default", &[], "other-worker", Duration::from_secs(60), 1)
        .await
        .unwrap();
    let cx = batch.items.pop().expect("claimed");

    let (tx, mut rx) = mpsc::unbounded_channel();
    let queue = Queue::new(worker_store);
    let running = Worker::builder(queue.clone())
        .settings(WorkerSettings {
            capacity: 2,
            poll_interval: Duration::from_secs(30),
            metrics_addr: None,
            ..WorkerSettings::default()
        })
        .without_sweep()
        .handler(Started(tx))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    // A first item, enqueued where the other worker is (one wake-up reaches
    // the worker: on PostgreSQL the NOTIFY alone), shows the worker's loop
    // has claimed and found the lane short, so it now waits for a wake-up
    // or the 30 s poll.
    let warm = NewItem::new(Ping::NAME, serde_json::json!({"n": 1}));
    let warm_id = warm.id;
    other
        .enqueue_many(&Principal::system(), vec![warm])
        .await
        .unwrap();
    let (id, _) = next_start(&mut rx, "the warm-up item").await;
    assert_eq!(id, warm_id);

    other.release(&cx, None).await.unwrap();
    let released = Instant::now();
    let (id, started) = next_start(&mut rx, "the released item").await;
    assert_eq!(id, held_id);
    let took = started.saturating_duration_since(released);
    eprintln!("WAKE-FIGURES | {backend} | released item started {took:?} after the release");
    assert!(
        took < Duration::from_millis(100),
        "the released item started {took:?} after the release (bound 100 ms)"
    );
    running.shutdown().await;
    if let Some(schema) = schema {
        pg_drop_schema(&pg_url().await, &schema).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_item_is_picked_up_at_once_memory() {
    released_item_is_picked_up_at_once("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_item_is_picked_up_at_once_sqlite() {
    released_item_is_picked_up_at_once("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_item_is_picked_up_at_once_postgres() {
    released_item_is_picked_up_at_once("postgres").await;
}
