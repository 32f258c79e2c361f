//! Every outcome write is retried (issue 9, point 4): a transient database
//! error on a fail, defer, release or cancel write, injected by the fault
//! store, either before the write reaches the store (nothing landed) or
//! after it landed (its reply lost), and the item still ends as the handler
//! said, with attempts as documented (docs/state-machine.md). No sweep
//! runs in these tests, so an item whose write was only logged would stay
//! claimed and every wait below would time out.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::Store;
use drover::store::fault::{FaultStore, Faults};
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, JobError, Outcome, RunningWorker, Strategy, WorkerSettings};
use drover::{Item, NewItem, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Say {
    outcome: String,
}

impl Kind for Say {
    const NAME: &'static str = "test.say";
}

/// Returns what its payload says; `hold` waits for its token and then
/// returns an error, as a handler interrupted by a shutdown would.
#[derive(Clone, Default)]
struct Sayer(Arc<AtomicUsize>);

impl Handler for Sayer {
    type Job = Say;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: no side effects",
        retry: "queue default",
        recovery: "swept after the lease",
        checkpoint: "none: one short call, a rerun starts over",
    };
    async fn handle(&self, cx: &JobContext, job: Say) -> Outcome {
        self.0.fetch_add(1, Ordering::SeqCst);
        match job.outcome.as_str() {
            "retry" => Err(JobError::Retry("smtp down".into())),
            "fatal" => Err(JobError::Fatal("bad address".into())),
            "snooze" => Err(JobError::Snooze(Duration::from_secs(3600))),
            "cancel" => Err(JobError::Cancel("order withdrawn".into())),
            "hold" => {
                cx.cancellation().cancelled().await;
                Err(JobError::Retry("interrupted".into()))
            }
            _ => Ok(Done::Completed),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The write fails before reaching the store.
    Before,
    /// The write lands and its reply is lost.
    ReplyLost,
}

fn arm(faults: &Faults, fault: Fault) {
    match fault {
        Fault::Before => faults.write_fails.store(1, Ordering::SeqCst),
        Fault::ReplyLost => faults.write_replies_lost.store(1, Ordering::SeqCst),
    }
}

async fn start(q: &Queue, sayer: &Sayer) -> RunningWorker {
    Worker::builder(q.clone())
        .settings(WorkerSettings {
            capacity: 2,
            lease: Duration::from_millis(3000),
            renew_interval: Duration::from_millis(500),
            renew_timeout: Duration::from_millis(200),
            heartbeat_interval: Duration::from_millis(100),
            poll_interval: Duration::from_millis(50),
            shutdown_grace: Duration::from_millis(100),
            cancel_grace: Duration::from_secs(5),
            metrics_addr: None,
            ..WorkerSettings::default()
        })
        .handler(sayer.clone())
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap()
}

/// A queue whose requeue delay is an hour, so a requeued item stays put.
fn queue(fault: Arc<FaultStore>) -> Queue {
    Queue::new(fault).with_config(QueueConfig {
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

/// Runs one item whose handler says `outcome` with `fault` armed on the
/// outcome write, and returns the item once it is no longer claimed.
async fn settle_under(outcome: &str, fault: Fault) -> (Item, Arc<Faults>) {
    settle_over(Arc::new(MemoryStore::new()), outcome, fault).await
}

/// As [`settle_under`], over `inner`.
async fn settle_over(inner: Arc<dyn Store>, outcome: &str, fault: Fault) -> (Item, Arc<Faults>) {
    let store = Arc::new(FaultStore::new(inner));
    let faults = store.faults.clone();
    arm(&faults, fault);
    let q = queue(store);
    let item = NewItem::new(Say::NAME, json!({ "outcome": outcome }));
    let id = item.id;
    q.enqueue_item(&Principal::system(), item).await.unwrap();
    let sayer = Sayer::default();
    let mut w = Some(start(&q, &sayer).await);
    if outcome == "hold" {
        wait_for(&q, id, "the handler to start", |_| {
            sayer.0.load(Ordering::SeqCst) == 1
        })
        .await;
        w.take().unwrap().shutdown().await;
    }
    // Claimed once, and no claim left: the outcome write has landed.
    let item = wait_for(&q, id, "the outcome to land", |i| {
        i.claim_seq >= 1 && i.claim_token.is_none()
    })
    .await;
    if let Some(w) = w {
        w.shutdown().await;
    }
    assert_eq!(sayer.0.load(Ordering::SeqCst), 1, "the handler ran once");
    (item, faults)
}

const BOTH: [Fault; 2] = [Fault::Before, Fault::ReplyLost];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_write_hit_by_a_transient_error_still_requeues_with_one_attempt() {
    for fault in BOTH {
        let (item, faults) = settle_under("retry", fault).await;
        assert_eq!(item.status, Status::Pending, "{fault:?}: {item:?}");
        assert_eq!(item.attempts, 1, "{fault:?}: one attempt, not two");
        assert_eq!(item.last_error.as_deref(), Some("smtp down"));
        assert!(faults.write_calls.load(Ordering::SeqCst) >= 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_write_hit_by_a_transient_error_still_dead_letters() {
    for fault in BOTH {
        let (item, _) = settle_under("fatal", fault).await;
        assert_eq!(item.status, Status::Failed, "{fault:?}: {item:?}");
        assert_eq!(item.attempts, 1, "{fault:?}");
        assert_eq!(item.last_error.as_deref(), Some("bad address"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_defer_write_hit_by_a_transient_error_still_defers_without_an_attempt() {
    for fault in BOTH {
        let before = chrono::Utc::now();
        let (item, _) = settle_under("snooze", fault).await;
        assert_eq!(item.status, Status::Pending, "{fault:?}: {item:?}");
        assert_eq!(item.attempts, 0, "{fault:?}: a defer spends no attempt");
        assert!(
            item.available_at > before + chrono::Duration::minutes(50),
            "{fault:?}: deferred by the handler's hour: {item:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_write_hit_by_a_transient_error_still_cancels_without_an_attempt() {
    for fault in BOTH {
        let (item, _) = settle_under("cancel", fault).await;
        assert_eq!(item.status, Status::Cancelled, "{fault:?}: {item:?}");
        assert_eq!(item.attempts, 0, "{fault:?}");
        assert_eq!(item.last_error.as_deref(), Some("order withdrawn"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_release_hit_by_a_transient_error_still_releases_without_an_attempt() {
    for fault in BOTH {
        let (item, _) = settle_under("hold", fault).await;
        assert_eq!(item.status, Status::Pending, "{fault:?}: {item:?}");
        assert_eq!(item.attempts, 0, "{fault:?}: a release spends no attempt");
        assert!(item.claim_token.is_none());
        assert!(
            item.last_error
                .as_deref()
                .unwrap_or("")
                .contains("shutting down"),
            "{fault:?}: {item:?}"
        );
    }
}

/// The read-back under PostgreSQL's row-level security: every outcome, a
/// fault of each kind, on a fresh schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_write_survives_a_transient_error_on_postgres() {
    let url = drover::testing::pg_url().await;
    let cases = [
        ("retry", Status::Pending, 1),
        ("fatal", Status::Failed, 1),
        ("snooze", Status::Pending, 0),
        ("cancel", Status::Cancelled, 0),
        ("hold", Status::Pending, 0),
    ];
    for (outcome, status, attempts) in cases {
        for fault in BOTH {
            let (store, schema) = drover::testing::pg_fresh_store().await;
            let (item, _) = settle_over(store, outcome, fault).await;
            drover::testing::pg_drop_schema(&url, &schema).await;
            assert_eq!(item.status, status, "{outcome} {fault:?}: {item:?}");
            assert_eq!(item.attempts, attempts, "{outcome} {fault:?}: {item:?}");
        }
    }
}
