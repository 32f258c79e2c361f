//! Cooperative cancellation (issue 9, point 5): a run's token fires before
//! its handler is dropped, so a handler that watches it can stop cleanly
//! and write its own cleanup within `cancel_grace`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, WorkerSettings};
use drover::{Item, NewItem, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Mutex;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Export {
    /// The handler's own time limit, in milliseconds (0: the default).
    limit_ms: u64,
}

impl Kind for Export {
    const NAME: &'static str = "test.export";
}

/// A long export that watches its token: when it fires, it writes its own
/// cleanup record (after an await, as a real cleanup would) and returns.
#[derive(Clone, Default)]
struct Exporter {
    started: Arc<AtomicUsize>,
    /// The cleanup records the handler wrote: (item, fencing token).
    cleanups: Arc<Mutex<Vec<(Uuid, i64)>>>,
    limit: Option<Duration>,
}

impl Handler for Exporter {
    type Job = Export;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: the cleanup record is keyed by item",
        retry: "queue default",
        recovery: "released on shutdown, retried on timeout",
        checkpoint: "none: one short call, a rerun starts over",
    };
    fn timeout(&self) -> Option<Duration> {
        self.limit
    }
    async fn handle(&self, cx: &JobContext, _job: Export) -> Outcome {
        self.started.fetch_add(1, Ordering::SeqCst);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(600)) => Ok(Done::Completed),
            () = cx.cancellation().cancelled() => {
                // An await after the token fired: the run is still polled.
                tokio::task::yield_now().await;
                self.cleanups.lock().await.push((cx.id(), cx.fencing_token()));
                Err(JobError::Retry("export interrupted".into()))
            }
        }
    }
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 2,
        lease: Duration::from_millis(3000),
        renew_interval: Duration::from_millis(500),
        renew_timeout: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(100),
        poll_interval: Duration::from_millis(50),
        shutdown_grace: Duration::from_millis(100),
        // Generous: the handler returns as soon as it has cleaned up.
        cancel_grace: Duration::from_secs(10),
        metrics_addr: None,
        ..WorkerSettings::default()
    }
}

fn queue() -> Queue {
    Queue::new(Arc::new(MemoryStore::new())).with_config(QueueConfig {
        retry: RetryPolicy {
            base: Duration::from_secs(3600),
            cap: Duration::from_secs(3600),
            ..RetryPolicy::default()
        },
        ..QueueConfig::default()
    })
}

async fn wait_for(q: &Queue, id: Uuid, what: &str, cond: impl Fn(&Item) -> bool) -> Item {
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let item = q.get(Uuid::nil(), id).await.unwrap();
        if cond(&item) {
            return item;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}: {item:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_watching_its_token_sees_it_fire_on_shutdown_and_cleans_up() {
    let q = queue();
    let item = NewItem::new(Export::NAME, json!({"limit_ms": 0}));
    let id = item.id;
    q.enqueue_item(&Principal::system(), item).await.unwrap();
    let h = Exporter::default();
    let w = Worker::builder(q.clone())
        .settings(settings())
        .handler(h.clone())
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_for(&q, id, "the export to start", |_| {
        h.started.load(Ordering::SeqCst) == 1
    })
    .await;
    let report = w.shutdown().await;
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.cancelled, 1);
    assert_eq!(
        *h.cleanups.lock().await,
        vec![(id, 1)],
        "the handler saw its token fire and wrote its cleanup"
    );
    let item = q.get(Uuid::nil(), id).await.unwrap();
    assert_eq!(item.status, Status::Pending, "released: {item:?}");
    assert_eq!(item.attempts, 0, "a shutdown spends no attempt");
    assert!(item.claim_token.is_none());
    assert!(
        item.last_error
            .as_deref()
            .unwrap_or("")
            .contains("shutting down"),
        "{item:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_watching_its_token_sees_it_fire_on_timeout_and_the_timeout_spends_an_attempt() {
    let q = queue();
    let item = NewItem::new(Export::NAME, json!({"limit_ms": 200}));
    let id = item.id;
    q.enqueue_item(&Principal::system(), item).await.unwrap();
    let h = Exporter {
        limit: Some(Duration::from_millis(200)),
        ..Exporter::default()
    };
    let w = Worker::builder(q.clone())
        .settings(settings())
        .handler(h.clone())
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let item = wait_for(&q, id, "the timeout's failure", |i| i.attempts == 1).await;
    assert_eq!(item.status, Status::Pending, "requeued: {item:?}");
    assert!(
        item.last_error
            .as_deref()
            .unwrap_or("")
            .contains("timed out"),
        "{item:?}"
    );
    assert_eq!(*h.cleanups.lock().await, vec![(id, 1)]);
    w.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_ignoring_its_token_is_dropped_after_the_cancel_grace() {
    #[derive(Clone, Default)]
    struct Stubborn(Arc<AtomicUsize>);
    impl Handler for Stubborn {
        type Job = Export;
        const STRATEGY: Strategy = Strategy {
            idempotency: "test handler: no side effects",
            retry: "queue default",
            recovery: "released on shutdown",
            checkpoint: "none: one short call, a rerun starts over",
        };
        async fn handle(&self, _cx: &JobContext, _job: Export) -> Outcome {
            self.0.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(Done::Completed)
        }
    }
    let q = queue();
    let item = NewItem::new(Export::NAME, json!({"limit_ms": 0}));
    let id = item.id;
    q.enqueue_item(&Principal::system(), item).await.unwrap();
    let h = Stubborn::default();
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            cancel_grace: Duration::from_millis(200),
            ..settings()
        })
        .handler(h.clone())
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_for(&q, id, "the run to start", |_| {
        h.0.load(Ordering::SeqCst) == 1
    })
    .await;
    // Ends (the test would hang otherwise): the run is dropped once the
    // cancel grace has passed.
    let report = w.shutdown().await;
    assert_eq!(report.cancelled, 1);
    let item = q.get(Uuid::nil(), id).await.unwrap();
    assert_eq!((item.status, item.attempts), (Status::Pending, 0));
}

#[test]
fn cancel_grace_has_a_documented_default_and_an_env_var() {
    assert_eq!(
        WorkerSettings::default().cancel_grace,
        drover::worker::CANCEL_GRACE_DEFAULT
    );
    assert_eq!(drover::worker::CANCEL_GRACE_DEFAULT, Duration::from_secs(1));
}
