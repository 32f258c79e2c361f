//! Fair spread at light load (docs/design.md, "How do idle workers share a
//! trickle?"): two idle workers on one lane share a trickle of items, each
//! enqueued after the previous one finished, on the memory, SQLite and
//! PostgreSQL stores (one store shared, and on PostgreSQL also one store per
//! worker, as two processes); and a worker that a wake-up designates but
//! that is full does not hold the work up: the other claims it after the
//! fallback delay. Synchronised on completions, one item at a time.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::Store;
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, Outcome, RunningWorker, Strategy, WorkerSettings};
use drover::{NewItem, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

const ITEMS: usize = 200;
const LANE: &str = "default";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Drip {}

impl Kind for Drip {
    const NAME: &'static str = "test.drip";
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hold {}

impl Kind for Hold {
    const NAME: &'static str = "test.hold";
}

const STRATEGY: Strategy = Strategy {
    idempotency: "test handler: no side effects",
    retry: "queue default",
    checkpoint: "none: one step, a rerun starts over",
    recovery: "swept after the lease",
};

/// Counts the items its worker ran and reports each completion.
#[derive(Clone)]
struct Tally {
    ran: Arc<AtomicUsize>,
    done: mpsc::UnboundedSender<()>,
}

impl Handler for Tally {
    type Job = Drip;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Drip) -> Outcome {
        self.ran.fetch_add(1, Ordering::SeqCst);
        let _ = self.done.send(());
        Ok(Done::Completed)
    }
}

/// Reports that it started, then holds its worker's only slot until told.
#[derive(Clone)]
struct Holder {
    ran: Arc<AtomicUsize>,
    started: mpsc::UnboundedSender<()>,
    release: Arc<Notify>,
}

impl Handler for Holder {
    type Job = Hold;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Hold) -> Outcome {
        self.ran.fetch_add(1, Ordering::SeqCst);
        let _ = self.started.send(());
        self.release.notified().await;
        Ok(Done::Completed)
    }
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 8,
        // Claims come from wake-ups, not from the poll.
        poll_interval: Duration::from_secs(5),
        // The peers are read on every beat: a quick beat, a quick start.
        heartbeat_interval: Duration::from_millis(100),
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

/// Waits until every worker counts `n` live workers on the lane (each has
/// read the workers table after the others' first beats landed).
async fn until_peers(workers: &[RunningWorker], n: usize) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while workers.iter().any(|w| w.lane_peers(LANE) != n) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        let seen: Vec<usize> = workers.iter().map(|w| w.lane_peers(LANE)).collect();
        panic!("workers never saw {n} peers on {LANE}: {seen:?}")
    });
}

/// Two workers (one on each of `on`), a trickle of [`ITEMS`] items enqueued
/// through `enqueue`, each after the previous one ran. Returns the split.
async fn trickle(enqueue: Queue, on: [Queue; 2]) -> (usize, usize) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ran = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let mut workers = Vec::new();
    for (q, r) in on.into_iter().zip(&ran) {
        let w = Worker::builder(q)
            .settings(settings())
            .handler(Tally {
                ran: r.clone(),
                done: tx.clone(),
            })
            .build()
            .unwrap();
        workers.push(w.start().await.unwrap());
    }
    until_peers(&workers, 2).await;
    for _ in 0..ITEMS {
        enqueue
            .enqueue_item(&Principal::system(), NewItem::new(Drip::NAME, json!({})))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the item ran")
            .unwrap();
    }
    for w in workers {
        w.shutdown().await;
    }
    let (a, b) = (ran[0].load(Ordering::SeqCst), ran[1].load(Ordering::SeqCst));
    assert_eq!(a + b, ITEMS);
    (a, b)
}

/// Even odds per item: below 30 % for either (60 of 200) would take a coin
/// that lands the same way far more often than chance (p < 1e-8).
fn assert_fair(backend: &str, (a, b): (usize, usize)) {
    eprintln!("{backend}: split of {ITEMS} trickled items: {a} / {b}");
    assert!(
        a.min(b) * 10 >= ITEMS * 3,
        "{backend}: split {a} / {b}, one worker took nearly everything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_two_idle_workers_share_a_trickle() {
    let q = Queue::new(Arc::new(MemoryStore::new()));
    assert_fair("memory", trickle(q.clone(), [q.clone(), q]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_two_idle_workers_share_a_trickle() {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let path = std::env::temp_dir().join(format!("drover-spread-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&path.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let q = Queue::new(Arc::new(store));
    let split = trickle(q.clone(), [q.clone(), q]).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    assert_fair("sqlite", split);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_idle_workers_on_one_store_share_a_trickle() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let q = Queue::new(store);
    let split = trickle(q.clone(), [q.clone(), q]).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
    assert_fair("postgres, one store", split);
}

/// One store per worker, as two processes; the items are enqueued through
/// the first worker's store, so its worker also hears the in-process
/// wake-up ahead of the NOTIFY both hear.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_idle_workers_on_two_stores_share_a_trickle() {
    let (first, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let second = drover::store::postgres::PgStore::connect(
        &url,
        drover::store::postgres::PgOptions {
            schema: schema.clone(),
            max_connections: 12,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (a, b) = (Queue::new(first), Queue::new(Arc::new(second)));
    let split = trickle(a.clone(), [a, b]).await;
    drover::testing::pg_drop_schema(&url, &schema).await;
    assert_fair("postgres, two stores", split);
}

/// A worker kept full (its only slot held) is still designated by about
/// half the wake-ups; every item still runs, on the other worker, after
/// the fallback delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_designated_worker_does_not_hold_up_the_trickle() {
    const DRIPS: usize = 40;
    let q = Queue::new(Arc::new(MemoryStore::new()));
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let drips = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let holds = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let mut workers = Vec::new();
    for (d, h) in drips.iter().zip(&holds) {
        let w = Worker::builder(q.clone())
            .settings(WorkerSettings {
                capacity: 1,
                // Nothing claimed ahead: a full worker claims nothing.
                prefetch: Some(0),
                ..settings()
            })
            .handler(Tally {
                ran: d.clone(),
                done: done_tx.clone(),
            })
            .handler(Holder {
                ran: h.clone(),
                started: started_tx.clone(),
                release: release.clone(),
            })
            .build()
            .unwrap();
        workers.push(w.start().await.unwrap());
    }
    until_peers(&workers, 2).await;
    q.enqueue_item(&Principal::system(), NewItem::new(Hold::NAME, json!({})))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the hold started")
        .unwrap();
    let held = usize::from(holds[1].load(Ordering::SeqCst) == 1);
    let free = 1 - held;
    for _ in 0..DRIPS {
        q.enqueue_item(&Principal::system(), NewItem::new(Drip::NAME, json!({})))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), done.recv())
            .await
            .expect("the item ran although its designated worker may be full")
            .unwrap();
    }
    assert_eq!(drips[free].load(Ordering::SeqCst), DRIPS);
    assert_eq!(drips[held].load(Ordering::SeqCst), 0);
    release.notify_one();
    for w in workers {
        w.shutdown().await;
    }
}
