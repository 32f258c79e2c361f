//! The worker runtime over the memory store: capacity, lease renewal and
//! self-fencing, liveness, drain-first shutdown, built-in kinds, and the
//! idempotency test helper.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::fault::FaultStore;
use drover::store::memory::MemoryStore;
use drover::store::{ListFilter, Store};
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, WorkerSettings, testkit};
use drover::{NewItem, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    ms: u64,
}

impl Kind for Work {
    const NAME: &'static str = "test.work";
}

#[derive(Default)]
struct Counters {
    running: AtomicUsize,
    max_running: AtomicUsize,
    started: AtomicUsize,
    finished: AtomicUsize,
    cancelled: AtomicUsize,
}

#[derive(Clone, Default)]
struct Probe(Arc<Counters>);

const STRATEGY: Strategy = Strategy {
    idempotency: "test handler: no side effects",
    retry: "queue default",
    checkpoint: "none: one step, a rerun starts over",
    recovery: "swept after the lease",
};

impl Handler for Probe {
    type Job = Work;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: Work) -> Outcome {
        let c = &self.0;
        c.started.fetch_add(1, Ordering::SeqCst);
        let now = c.running.fetch_add(1, Ordering::SeqCst) + 1;
        c.max_running.fetch_max(now, Ordering::SeqCst);
        // Counts a run dropped before it finished: that is how the runtime
        // cancels a handler that does not watch its token.
        let mut guard = DropCount(self.0.clone(), false);
        let r = tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(job.ms)) => Ok(Done::Completed),
            () = cx.cancellation().cancelled() => Err(JobError::Retry("cancelled".into())),
        };
        guard.1 = true;
        if r.is_ok() {
            c.finished.fetch_add(1, Ordering::SeqCst);
        } else {
            c.cancelled.fetch_add(1, Ordering::SeqCst);
        }
        c.running.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

/// Cancellation is seen even when the handler ignores the token: the
/// future is dropped. This guard counts drops of unfinished runs.
struct DropCount(Arc<Counters>, bool);
impl Drop for DropCount {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
            self.0.running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[derive(Clone, Default)]
struct Oblivious(Arc<Counters>);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Long {
    ms: u64,
}
impl Kind for Long {
    const NAME: &'static str = "test.long";
}

impl Handler for Oblivious {
    type Job = Long;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, job: Long) -> Outcome {
        self.0.started.fetch_add(1, Ordering::SeqCst);
        self.0.running.fetch_add(1, Ordering::SeqCst);
        let mut guard = DropCount(self.0.clone(), false);
        tokio::time::sleep(Duration::from_millis(job.ms)).await;
        guard.1 = true;
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        Ok(Done::Completed)
    }
}

fn fast_settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 4,
        lease: Duration::from_millis(1200),
        renew_interval: Duration::from_millis(300),
        renew_timeout: Duration::from_millis(100),
        heartbeat_interval: Duration::from_millis(100),
        poll_interval: Duration::from_millis(50),
        sweep_interval: Duration::from_millis(200),
        shutdown_grace: Duration::from_secs(5),
        metrics_addr: None,
        // No heartbeat items among the ones these tests count.
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

fn fast_queue(store: Arc<dyn Store>) -> Queue {
    Queue::new(store).with_config(QueueConfig {
        retry: RetryPolicy {
            base: Duration::from_millis(20),
            cap: Duration::from_millis(200),
            ..RetryPolicy::default()
        },
        ..QueueConfig::default()
    })
}

async fn wait_until(what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn all_items(q: &Queue) -> Vec<drover::Item> {
    q.list(&ListFilter {
        limit: 100_000,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn count_status(q: &Queue, st: Status) -> usize {
    all_items(q).await.iter().filter(|i| i.status == st).count()
}

async fn enqueue_work(q: &Queue, n: usize, ms: u64) -> Vec<Uuid> {
    let items: Vec<NewItem> = (0..n)
        .map(|_| NewItem::new(Work::NAME, json!({"ms": ms})))
        .collect();
    let ids = items.iter().map(|i| i.id).collect();
    q.enqueue_many(&Principal::system(), items).await.unwrap();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claim_within_capacity_never_more_than_n_handlers() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let probe = Probe::default();
    enqueue_work(&q, 40, 30).await;
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            capacity: 3,
            ..fast_settings()
        })
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("all done", Duration::from_secs(20), async || {
        count_status(&q, Status::Done).await == 40
    })
    .await;
    w.shutdown().await;
    assert_eq!(probe.0.max_running.load(Ordering::SeqCst), 3);
    assert_eq!(probe.0.started.load(Ordering::SeqCst), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_renewal_keeps_a_long_item_ours() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let probe = Probe::default();
    let ids = enqueue_work(&q, 1, 2_500).await;
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("done", Duration::from_secs(10), async || {
        count_status(&q, Status::Done).await == 1
    })
    .await;
    w.shutdown().await;
    let item = q.get(Uuid::nil(), ids[0]).await.unwrap();
    // Ran past almost three leases, yet was claimed once and never swept.
    assert_eq!(item.claim_seq, 1);
    assert_eq!(item.attempts, 0);
    assert_eq!(probe.0.cancelled.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renewal_refused_with_conflict_cancels_the_handler_at_once() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let probe = Probe::default();
    let ids = enqueue_work(&q, 1, 30_000).await;
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("started", Duration::from_secs(5), async || {
        probe.0.started.load(Ordering::SeqCst) == 1
    })
    .await;
    // An operator cancels the item: the holder's next renewal is refused.
    q.cancel(&Principal::system(), Uuid::nil(), ids[0])
        .await
        .unwrap();
    wait_until("handler cancelled", Duration::from_secs(2), async || {
        probe.0.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    w.shutdown().await;
    let item = q.get(Uuid::nil(), ids[0]).await.unwrap();
    assert_eq!(
        item.status,
        Status::Cancelled,
        "the lost holder wrote nothing"
    );
    assert_eq!(item.attempts, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renewal_that_times_out_is_retried() {
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    let faults = fault.faults.clone();
    faults.extend_hangs.store(1, Ordering::SeqCst);
    faults.extend_hang_ms.store(250, Ordering::SeqCst);
    let q = fast_queue(fault);
    let probe = Probe::default();
    let ids = enqueue_work(&q, 1, 1_500).await;
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("done", Duration::from_secs(10), async || {
        count_status(&q, Status::Done).await == 1
    })
    .await;
    w.shutdown().await;
    assert!(faults.extend_calls.load(Ordering::SeqCst) >= 3);
    assert_eq!(probe.0.cancelled.load(Ordering::SeqCst), 0);
    assert_eq!(q.get(Uuid::nil(), ids[0]).await.unwrap().claim_seq, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renewal_failing_for_half_the_lease_cancels_the_handler_and_releases_the_item() {
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    let faults = fault.faults.clone();
    faults.extend_fails.store(true, Ordering::SeqCst);
    let q = fast_queue(fault);
    let probe = Probe::default();
    let ids = enqueue_work(&q, 1, 30_000).await;
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            lease: Duration::from_secs(2),
            renew_interval: Duration::from_millis(300),
            ..fast_settings()
        })
        .handler(probe.clone())
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("handler cancelled", Duration::from_secs(5), async || {
        probe.0.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    let tries = faults.extend_calls.load(Ordering::SeqCst);
    assert!(tries >= 2, "renewal was retried before giving up ({tries})");
    // The claim still stood (the store was only failing renewals), so the
    // holder hands the item back at once, spending no attempt, instead of
    // leaving it to lapse and be charged one by the sweep.
    // (No sweep runs here, so pending again, or claimed a second time by
    // this same worker, can only follow that release.)
    wait_until("item released", Duration::from_secs(5), async || {
        let item = q.get(Uuid::nil(), ids[0]).await.unwrap();
        item.status == Status::Pending || item.claim_seq >= 2
    })
    .await;
    w.shutdown().await;
    let item = q.get(Uuid::nil(), ids[0]).await.unwrap();
    assert_eq!(item.status, Status::Pending);
    assert_eq!(item.attempts, 0, "no attempt spent: {item:?}");
    assert!(item.claim_token.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_liveness_publish_leaves_claiming_running_and_healthz_up() {
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    let faults = fault.faults.clone();
    faults.beat_fails.store(true, Ordering::SeqCst);
    let q = fast_queue(fault);
    let probe = Probe::default();
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..fast_settings()
        })
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let addr = w.metrics_addr().unwrap();
    enqueue_work(&q, 10, 5).await;
    wait_until("all done", Duration::from_secs(10), async || {
        count_status(&q, Status::Done).await == 10
    })
    .await;
    wait_until("beats attempted", Duration::from_secs(5), async || {
        faults.beat_calls.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert!(w.health().is_healthy());
    let (status, body) = http_get(addr, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.contains("drover_completed_total"), "{body}");
    assert!(body.contains("drover_handler_duration_seconds"), "{body}");
    // Item counters carry the lane and the kind, the histogram the outcome
    // too; no series carries a tenant (its count must not grow with them).
    // (The recorder is per process and shared with the other tests here, so
    // the values are not this test's alone.)
    let completed: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("drover_completed_total{"))
        .collect();
    assert!(
        completed
            .iter()
            .any(|l| l.contains("lane=\"") && l.contains("kind=\"")),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("drover_handler_duration_seconds_count{")
                && l.contains("outcome=\"completed\"")),
        "{body}"
    );
    assert!(!body.contains("tenant=\""), "{body}");
    let stop = tokio::spawn(w.shutdown());
    stop.await.unwrap();
    assert!(q.workers().await.unwrap().is_empty(), "no beat ever landed");
}

/// A liveness publish that outlasts the beat interval (a database that
/// hangs) is left to finish and the next beats skip theirs: timed-out
/// writes never stack up on the pool. Fails with the publish re-spawned
/// on every beat (about one hung write per interval).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hung_liveness_publishes_never_stack() {
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    let faults = fault.faults.clone();
    // Each publish hangs for ten beat intervals (fast_settings: 100 ms).
    faults.beat_hang_ms.store(1000, Ordering::SeqCst);
    let q = fast_queue(fault);
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .handler(Probe::default())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    // Three hung publishes one after another: thirty beats went by.
    wait_until("three publishes", Duration::from_secs(20), async || {
        faults.beat_calls.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert_eq!(
        faults.beats_in_flight_max.load(Ordering::SeqCst),
        1,
        "at most one liveness write in flight"
    );
    assert!(w.health().is_healthy(), "the in-memory beat goes on");
    faults.beat_hang_ms.store(0, Ordering::SeqCst);
    w.shutdown().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let status = buf[9..12].parse().unwrap();
    (status, buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drain_on_stop_finishes_short_items_and_releases_the_rest() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let probe = Oblivious::default();
    let mk = |ms: u64| NewItem::new(Long::NAME, json!({"ms": ms}));
    let items = vec![mk(300), mk(300), mk(60_000), mk(60_000)];
    let ids: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    q.enqueue_many(&Principal::system(), items).await.unwrap();
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            shutdown_grace: Duration::from_millis(800),
            ..fast_settings()
        })
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("all four running", Duration::from_secs(5), async || {
        probe.0.started.load(Ordering::SeqCst) == 4
    })
    .await;
    // Items enqueued after the stop must not be claimed.
    let report = {
        let stop = w.shutdown();
        q.enqueue_item(&Principal::system(), mk(1)).await.unwrap();
        stop.await
    };
    assert_eq!(report.in_flight, 4);
    assert_eq!(report.cancelled, 2);
    for (i, id) in ids.iter().enumerate() {
        let item = q.get(Uuid::nil(), *id).await.unwrap();
        if i < 2 {
            assert_eq!(item.status, Status::Done);
        } else {
            assert_eq!(item.status, Status::Pending, "released");
            assert_eq!(item.attempts, 0, "no attempt spent");
            assert!(item.last_error.unwrap().contains("shutting down"));
        }
    }
    assert_eq!(
        probe.0.started.load(Ordering::SeqCst),
        4,
        "nothing claimed after stop"
    );
    let rows = q.workers().await.unwrap();
    assert_eq!(rows[0].state, "offline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn builtin_kinds_behave_as_documented() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let sys = Principal::system();
    let noop = q
        .enqueue_item(&sys, NewItem::new("drover.noop", json!({"n": 1})))
        .await
        .unwrap();
    let echo = q
        .enqueue_item(&sys, NewItem::new("drover.echo", json!({"say": ["hi", 2]})))
        .await
        .unwrap();
    let sleep = q
        .enqueue_item(&sys, NewItem::new("drover.sleep", json!({"ms": 200})))
        .await
        .unwrap();
    let fail = q
        .enqueue_item(&sys, NewItem::new("drover.fail", json!({"times": 2})))
        .await
        .unwrap();
    let panic = q
        .enqueue_item(
            &sys,
            NewItem::new("drover.panic", json!({})).with_max_attempts(3),
        )
        .await
        .unwrap();
    let bad = q
        .enqueue_item(&sys, NewItem::new("drover.sleep", json!({"millis": 5})))
        .await
        .unwrap();
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .builtins()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("all final", Duration::from_secs(15), async || {
        all_items(&q).await.iter().all(|i| i.status.is_final())
    })
    .await;
    w.shutdown().await;
    let get = async |id| q.get(Uuid::nil(), id).await.unwrap();
    assert_eq!(get(noop.item.id).await.status, Status::Done);
    assert_eq!(get(noop.item.id).await.result, None);
    let e = get(echo.item.id).await;
    assert_eq!(e.last_error, None, "echo");
    assert_eq!(
        (e.status, e.result),
        (Status::Done, Some(json!({"say": ["hi", 2]})))
    );
    assert_eq!(
        q.result::<drover::builtin::Echo>(Uuid::nil(), echo.item.id)
            .await
            .unwrap(),
        Some(json!({"say": ["hi", 2]})),
        "the typed read"
    );
    assert_eq!(get(sleep.item.id).await.status, Status::Done);
    let f = get(fail.item.id).await;
    assert_eq!((f.status, f.attempts, f.claim_seq), (Status::Done, 2, 3));
    let p = get(panic.item.id).await;
    assert_eq!((p.status, p.attempts), (Status::Failed, 3));
    assert!(p.last_error.unwrap().contains("panicked"));
    let b = get(bad.item.id).await;
    assert_eq!(
        (b.status, b.attempts),
        (Status::Failed, 1),
        "undecodable payload is not retried"
    );
    assert!(
        b.last_error.unwrap().contains("ms"),
        "the error names the field"
    );
    assert_eq!(q.audit(Uuid::nil(), p.id).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kind_without_a_handler_waits_and_is_not_failed() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let sys = Principal::system();
    let other = q
        .enqueue_item(&sys, NewItem::new("nobody.handles", json!({})))
        .await
        .unwrap();
    let w = Worker::builder(q.clone())
        .settings(fast_settings())
        .builtins()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    q.enqueue_item(&sys, NewItem::new("drover.noop", json!({})))
        .await
        .unwrap();
    wait_until("noop done", Duration::from_secs(5), async || {
        count_status(&q, Status::Done).await == 1
    })
    .await;
    w.shutdown().await;
    let item = q.get(Uuid::nil(), other.item.id).await.unwrap();
    assert_eq!((item.status, item.attempts), (Status::Pending, 0));
}

#[tokio::test]
async fn handler_without_a_strategy_is_refused_and_pool_is_checked() {
    struct Blank;
    impl Handler for Blank {
        type Job = Work;
        const STRATEGY: Strategy = Strategy {
            idempotency: "",
            retry: "x",
            checkpoint: "x",
            recovery: "x",
        };
        async fn handle(&self, _cx: &JobContext, _job: Work) -> Outcome {
            Ok(Done::Completed)
        }
    }
    let e = Worker::builder(Queue::memory())
        .handler(Blank)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("idempotency"), "{e}");
    let e = Worker::builder(Queue::memory()).build().unwrap_err();
    assert!(e.to_string().contains("nothing to do"), "{e}");
}

/// A handler whose effect is a fenced write: the second run of the same
/// item with a newer fencing token finds the effect already there.
#[derive(Clone, Default)]
struct Ledger(Arc<std::sync::Mutex<std::collections::HashMap<Uuid, i64>>>);

impl Handler for Ledger {
    type Job = Work;
    const STRATEGY: Strategy = Strategy {
        idempotency: "one ledger row per item id, written with the fencing token",
        retry: "queue default",
        checkpoint: "none: one step, a rerun starts over",
        recovery: "swept and run again; the row makes the rerun a no-op",
    };
    async fn handle(&self, cx: &JobContext, _job: Work) -> Outcome {
        let mut rows = self.0.lock().unwrap();
        match rows.get(&cx.id()) {
            Some(seen) if *seen >= cx.fencing_token() => {
                Err(JobError::Fatal("stale holder".into()))
            }
            Some(_) => Ok(Done::Completed),
            None => {
                rows.insert(cx.id(), cx.fencing_token());
                Ok(Done::Completed)
            }
        }
    }
}

#[tokio::test]
async fn run_twice_helper_shows_a_handler_is_idempotent() {
    let ledger = Ledger::default();
    let (first, second) = testkit::run_twice(&ledger, &Work { ms: 0 }, Uuid::nil(), Uuid::nil())
        .await
        .unwrap();
    assert_eq!(first, Ok(Done::Completed));
    assert_eq!(second, Ok(Done::Completed));
    assert_eq!(
        ledger.0.lock().unwrap().len(),
        1,
        "the effect happened once"
    );
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Block {
    ms: u64,
}
impl Kind for Block {
    const NAME: &'static str = "test.block";
}

/// Blocks its thread (a CPU-bound or blocking call inside async code).
#[derive(Clone, Default)]
struct Blocker(Arc<Counters>);

impl Handler for Blocker {
    type Job = Block;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, job: Block) -> Outcome {
        self.0.started.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(job.ms));
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        Ok(Done::Completed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocked_handler_loses_its_lease_while_others_keep_theirs() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let blocker = Blocker::default();
    let probe = Probe::default();
    let blocked = q
        .enqueue_item(
            &Principal::system(),
            NewItem::new(Block::NAME, json!({"ms": 3_000})),
        )
        .await
        .unwrap();
    let healthy = enqueue_work(&q, 1, 3_000).await;
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            capacity: 2,
            prefetch: Some(0),
            ..fast_settings()
        })
        .handler(blocker.clone())
        .handler(probe.clone())
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until(
        "the healthy item done",
        Duration::from_secs(10),
        async || q.get(Uuid::nil(), healthy[0]).await.unwrap().status == Status::Done,
    )
    .await;
    wait_until(
        "the blocker returned",
        Duration::from_secs(10),
        async || blocker.0.finished.load(Ordering::SeqCst) >= 1,
    )
    .await;
    w.shutdown().await;
    // The healthy item kept its lease through renewals on other threads.
    let h = q.get(Uuid::nil(), healthy[0]).await.unwrap();
    assert_eq!((h.claim_seq, h.attempts), (1, 0));
    // The blocked run could not renew: its lease passed, the sweep handed
    // the item back, and the stale run's completion was not written.
    let b = q.get(Uuid::nil(), blocked.item.id).await.unwrap();
    assert!(b.claim_seq >= 2 || b.attempts >= 1, "{b:?}");
    assert_eq!(b.last_error.as_deref(), Some("lease expired"), "{b:?}");
}

/// Regression: an item prefetched into the ready buffer while every slot
/// runs a handler longer than the lease used to wait there unrenewed until
/// the sweep handed it back as a failed attempt (never run, yet charged).
/// It is now released unstarted, spending no attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prefetched_items_waiting_past_the_lease_spend_no_attempt() {
    let q = fast_queue(Arc::new(MemoryStore::new()));
    let sys = Principal::system();
    let settings = WorkerSettings {
        capacity: 2,
        ..fast_settings()
    };
    // Two handlers outlast the lease (1.2 s) three times over; two more
    // items sit in the prefetch buffer all that time.
    for _ in 0..4 {
        q.enqueue_item(&sys, NewItem::new("drover.sleep", json!({"ms": 3600})))
            .await
            .unwrap();
    }
    let w = Worker::builder(q.clone())
        .settings(settings)
        .builtins()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    wait_until("two items done", Duration::from_secs(10), async || {
        count_status(&q, Status::Done).await >= 2
    })
    .await;
    w.shutdown().await;
    for item in all_items(&q).await {
        assert_eq!(
            item.attempts, 0,
            "item {} was charged an attempt ({:?}, last error {:?})",
            item.id, item.status, item.last_error
        );
    }
}
