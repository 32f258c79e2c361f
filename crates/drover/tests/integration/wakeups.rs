//! An idle worker polling only every 30 s picks up an item another worker
//! released in under 100 ms: the release wakes it (on PostgreSQL by the
//! release statement's NOTIFY, sent from another store so only the NOTIFY
//! can reach the worker; on SQLite and memory by the in-process signal).
//!
//! 100 ms is the correctness bound for a wake-up that arrived (a poll would
//! take 30 s); a wake-up is normally a few milliseconds.
//!
//! On SQLite, work written through another store on the same file (as
//! another process would: its own writer connection) reaches an idle worker
//! and an idle relay through the file's watch (`PRAGMA data_version`), not
//! the poll: with the poll at 30 s, the work running at all shows it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::outbox::{NewOutboxRow, OutboxStatus, OutboxStore, Relay, RelayConfig};
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

/// Two stores on one new SQLite file: what two processes sharing it open.
async fn two_sqlite_stores() -> (SqliteStore, SqliteStore) {
    let path = std::env::temp_dir().join(format!("drover-wake-{}.db", Uuid::new_v4()));
    let path = path.to_str().unwrap();
    let a = SqliteStore::open(path, SqliteOptions::default())
        .await
        .unwrap();
    a.migrate().await.unwrap();
    let b = SqliteStore::open(path, SqliteOptions::default())
        .await
        .unwrap();
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_written_through_another_sqlite_store_wake_an_idle_worker() {
    let (worker_store, other_store) = two_sqlite_stores().await;
    let other = Queue::new(Arc::new(other_store));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let running = Worker::builder(Queue::new(Arc::new(worker_store)))
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
    // The first item may be claimed by the worker's first round; once it
    // ran, the lane's claim came back short and only a wake-up (or the 30 s
    // poll) claims again. Each later item, written only after the one
    // before it ran, can start only through the watch.
    for n in 0..5 {
        let item = NewItem::new(Ping::NAME, serde_json::json!({ "n": n }));
        let id = item.id;
        other
            .enqueue_many(&Principal::system(), vec![item])
            .await
            .unwrap();
        let (started, _) = next_start(&mut rx, &format!("item {n}")).await;
        assert_eq!(started, id);
    }
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_rows_written_through_another_sqlite_store_wake_an_idle_relay() {
    let (relay_store, other) = two_sqlite_stores().await;
    let relay = Relay::new(
        Queue::new(Arc::new(relay_store.clone())),
        RelayConfig {
            interval: Duration::from_secs(30),
            ..RelayConfig::default()
        },
    )
    .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { relay.run(stop).await }
    });
    // As for the worker: the first row may go with the relay's first run;
    // each later one, written after the one before was relayed, only
    // through the watch.
    for n in 0..3 {
        let row = NewOutboxRow::new("work.wake_ping", serde_json::json!({ "n": n }));
        other.outbox_insert(&row).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let got = relay_store.outbox_get(Uuid::nil(), row.id).await.unwrap();
                if got.is_some_and(|r| r.status == OutboxStatus::Done) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("row {n} not relayed within 10 s (the relay's poll is 30 s)"));
    }
    stop.cancel();
    task.await.unwrap();
}
