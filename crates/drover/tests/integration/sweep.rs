//! The sweep nothing can stall (a step that never returns, a step that
//! panics, a pass dropped mid-way) and gauges that tell the truth (a drained
//! lane reads 0, every worker publishes, the last completed pass is seen by
//! a worker that did not run it), on every backend.
//!
//! "Another worker's lease-expired items": items claimed under a worker id
//! that never writes again, as a crashed worker leaves them. Each bound is
//! the correctness bound of the design, lease + 2 sweep intervals from the
//! claim, synchronised on the items' rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use drover::item::{NewItem, Status};
use drover::maintenance::{SweepConfig, SweepStep, Sweeper};
use drover::queue::Principal;
use drover::store::fault::FaultStore;
use drover::store::memory::MemoryStore;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{ManualClock, Store};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use drover::{Queue, Result};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A queue on one backend, and what to drop after the test.
struct Backend {
    queue: Queue,
    schema: Option<String>,
    file: Option<std::path::PathBuf>,
}

impl Backend {
    async fn open(name: &str) -> Backend {
        match name {
            "memory" => Backend {
                queue: Queue::memory(),
                schema: None,
                file: None,
            },
            "sqlite" => {
                let path = std::env::temp_dir().join(format!("drover-sweep-{}.db", Uuid::new_v4()));
                let store = SqliteStore::open(path.to_str().unwrap(), SqliteOptions::default())
                    .await
                    .unwrap();
                store.migrate().await.unwrap();
                Backend {
                    queue: Queue::new(Arc::new(store)),
                    schema: None,
                    file: Some(path),
                }
            }
            "postgres" => {
                let (store, schema) = pg_fresh_store().await;
                Backend {
                    queue: Queue::new(store),
                    schema: Some(schema),
                    file: None,
                }
            }
            other => panic!("unknown backend {other}"),
        }
    }

    async fn finish(self) {
        if let Some(schema) = self.schema {
            pg_drop_schema(&pg_url().await, &schema).await;
        }
        if let Some(f) = self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn memory() {
                    super::$case("memory").await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$case("sqlite").await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$case("postgres").await;
                }
            }
        )*
    };
}

on_every_backend!(
    a_step_that_never_returns_stalls_no_requeue,
    a_step_that_panics_stalls_no_requeue,
    a_dropped_pass_releases_the_lease,
    every_worker_publishes_gauges_and_the_last_pass,
    a_pass_renews_only_a_lease_it_might_outlast,
);

const ITEM_LEASE: Duration = Duration::from_secs(1);

/// A sweep with a 1 s interval and a 0.5 s step timeout.
fn quick() -> SweepConfig {
    SweepConfig {
        interval: Duration::from_secs(1),
        step_timeout: Duration::from_millis(500),
        lease: Duration::from_secs(2),
        ..SweepConfig::default()
    }
}

/// A host step that counts its runs, then does what `body` says.
struct Step<F> {
    name: &'static str,
    runs: Arc<AtomicUsize>,
    body: F,
}

impl<F, Fut> SweepStep for Step<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    fn name(&self) -> &str {
        self.name
    }
    fn run<'a>(&'a self, _q: &'a Queue) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Box::pin((self.body)())
    }
}

fn step<F, Fut>(name: &'static str, body: F) -> (Box<dyn SweepStep>, Arc<AtomicUsize>)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    let runs = Arc::new(AtomicUsize::new(0));
    (
        Box::new(Step {
            name,
            runs: runs.clone(),
            body,
        }),
        runs,
    )
}

/// Waits (bounded) until `runs` reaches `n`.
async fn runs_reach(runs: &AtomicUsize, n: usize, within: Duration) {
    let until = Instant::now() + within;
    while runs.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < until,
            "the step did not run {n} times within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Claims `n` fresh items under a worker that never writes again; returns
/// their ids and when they were claimed.
async fn abandoned(q: &Queue, lane: &str, n: usize) -> (Vec<Uuid>, Instant) {
    let items: Vec<NewItem> = (0..n)
        .map(|i| {
            let mut it = NewItem::new("sweep.test", json!({"i": i}));
            it.lane = lane.into();
            it
        })
        .collect();
    let ids: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    q.enqueue_many(&Principal::system(), items).await.unwrap();
    let claimed_at = Instant::now();
    let batch = q
        .claim(lane, &[], "crashed-worker", ITEM_LEASE, n as u32)
        .await
        .unwrap();
    assert_eq!(batch.items.len(), n);
    (ids, claimed_at)
}

/// Waits until every item is handed back (pending, one attempt spent);
/// returns how long after `since` that was seen. Panics past `limit`.
async fn requeued(q: &Queue, ids: &[Uuid], since: Instant, limit: Duration) -> Duration {
    loop {
        let mut all = true;
        for id in ids {
            let it = q.store().item_get(Uuid::nil(), *id).await.unwrap().unwrap();
            if !(it.status == Status::Pending && it.attempts == 1) {
                all = false;
                break;
            }
        }
        if all {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "lease-expired items not requeued within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A host step that never returns is abandoned at the step timeout each
/// pass; the requeue keeps running and hands back expired items within
/// lease + 2 sweep intervals. (Before: the pass awaited the step forever,
/// so no later pass ever ran.)
async fn a_step_that_never_returns_stalls_no_requeue(backend: &str) {
    let b = Backend::open(backend).await;
    let (hang, runs) = step("hangs", std::future::pending::<Result<u64>>);
    let sweeper = Arc::new(
        Sweeper::new(b.queue.clone(), quick())
            .unwrap()
            .with_step(hang),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (s, stop) = (sweeper.clone(), stop.clone());
        async move { s.run(stop).await }
    });
    // The first pass is hanging in the step: its requeue is behind it.
    runs_reach(&runs, 1, Duration::from_secs(10)).await;
    let (ids, claimed_at) = abandoned(&b.queue, "hang", 3).await;
    let bound = ITEM_LEASE + 2 * quick().interval;
    let took = requeued(&b.queue, &ids, claimed_at, bound).await;
    assert!(
        took <= bound,
        "requeued {took:?} after the claim (bound {bound:?})"
    );
    // The step was abandoned and run again in a later pass.
    runs_reach(&runs, 2, Duration::from_secs(5)).await;
    stop.cancel();
    task.await.unwrap();
    b.finish().await;
}

/// A step that panics is reported, the steps after it still run, and the
/// next pass runs: expired items are handed back within lease + 2 sweep
/// intervals. (Before: the panic unwound out of the pass and ended the
/// sweep task, and on PostgreSQL kept the advisory lock.)
async fn a_step_that_panics_stalls_no_requeue(backend: &str) {
    let b = Backend::open(backend).await;
    #[allow(clippy::panic)]
    let (boom, _) = step("panics", || async { panic!("a host step panicking") });
    let (after, after_runs) = step("after", || async { Ok(7) });
    let sweeper = Arc::new(
        Sweeper::new(b.queue.clone(), quick())
            .unwrap()
            .with_step(boom)
            .with_step(after),
    );
    let report = sweeper.run_once().await.unwrap();
    assert!(report.swept);
    assert!(
        report
            .errors
            .iter()
            .any(|(s, e)| s == "panics" && e.contains("a host step panicking")),
        "{:?}",
        report.errors
    );
    // The built-in parking step (nothing to park) runs first, then the
    // host's steps in order; the one that panicked reports no count.
    assert_eq!(
        report.steps,
        vec![
            (drover::maintenance::PARK_STEP.to_owned(), 0),
            ("after".to_owned(), 7)
        ]
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (s, stop) = (sweeper.clone(), stop.clone());
        async move { s.run(stop).await }
    });
    let (ids, claimed_at) = abandoned(&b.queue, "panic", 3).await;
    let bound = ITEM_LEASE + 2 * quick().interval;
    let took = requeued(&b.queue, &ids, claimed_at, bound).await;
    assert!(
        took <= bound,
        "requeued {took:?} after the claim (bound {bound:?})"
    );
    // The step after the panicking one runs in the later passes too.
    runs_reach(&after_runs, 2, Duration::from_secs(5)).await;
    stop.cancel();
    task.await.unwrap();
    b.finish().await;
}

/// A pass dropped while a step runs (a worker shutting down) hands the
/// lease back at once: another sweeper takes it long before it would pass.
async fn a_dropped_pass_releases_the_lease(backend: &str) {
    let b = Backend::open(backend).await;
    let (hang, runs) = step("hangs", std::future::pending::<Result<u64>>);
    let config = SweepConfig {
        step_timeout: Duration::from_secs(60),
        lease: Duration::from_secs(120),
        ..quick()
    };
    let sweeper = Arc::new(
        Sweeper::new(b.queue.clone(), config)
            .unwrap()
            .with_step(hang),
    );
    let pass = tokio::spawn({
        let s = sweeper.clone();
        async move { s.run_once().await }
    });
    runs_reach(&runs, 1, Duration::from_secs(10)).await;
    pass.abort();
    let _ = pass.await;
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let got = b
            .queue
            .store()
            .sweep_lease_take("next", Duration::from_secs(60))
            .await
            .unwrap();
        if got.is_some() {
            break;
        }
        assert!(
            Instant::now() < until,
            "the dropped pass kept the lease (it holds for 120 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.finish().await;
}

/// The value of `series` (name and labels exactly as rendered) in this
/// process's Prometheus text.
fn scraped(series: &str) -> Option<f64> {
    let text = drover::worker::prometheus()?.render();
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A worker that does not hold the lease still reads and publishes the
/// gauges and the last completed pass (before: only the lock holder set any
/// gauge, and no last-pass gauge existed).
async fn every_worker_publishes_gauges_and_the_last_pass(backend: &str) {
    let b = Backend::open(backend).await;
    let lane = format!("g-{backend}-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let mut it = NewItem::new("sweep.test", json!({}));
    it.lane = lane.clone();
    b.queue
        .enqueue_many(&Principal::system(), vec![it])
        .await
        .unwrap();
    let holder = Sweeper::new(b.queue.clone(), quick()).unwrap();
    let other = Sweeper::new(b.queue.clone(), quick()).unwrap();
    assert!(holder.run_once().await.unwrap().swept);
    // The pass that swept recorded the lane's queue wait for the chart.
    let waits = b
        .queue
        .wait_history(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH)
        .await
        .unwrap();
    assert!(waits.iter().any(|w| w.lane == lane), "{waits:?}");
    // Someone else holds the lease now; `other` gets no pass.
    let blocker = b
        .queue
        .store()
        .sweep_lease_take("elsewhere", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("free after the holder's pass");
    let _ = drover::worker::prometheus();
    let report = other.run_once().await.unwrap();
    assert!(!report.swept);
    let gauges = report.gauges.expect("gauges read without the lease");
    assert!(gauges.oldest_age_seconds.iter().any(|(l, _)| *l == lane));
    let series = format!("drover_queue_oldest_age_seconds{{lane=\"{lane}\"}}");
    assert!(scraped(&series).is_some(), "{series} not published");
    let last = report
        .last_pass
        .expect("the holder's completed pass is seen");
    assert!((chrono::Utc::now() - last).num_seconds().abs() < 60);
    assert!(
        scraped("drover_sweep_last_run_timestamp_seconds").is_some_and(|t| t > 1.0e9),
        "last-run gauge not published"
    );
    b.queue
        .store()
        .sweep_lease_release(blocker, false)
        .await
        .unwrap();
    b.finish().await;
}

/// A drained lane's oldest-age gauge reads 0, not its last value (before:
/// the lane left the gauge query's result and the gauge kept its value).
#[tokio::test]
async fn a_drained_lane_reads_zero() {
    let clock = Arc::new(ManualClock::new());
    let q = Queue::new(Arc::new(MemoryStore::with_clock(clock.clone())));
    let lane = format!("drained-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let mut it = NewItem::new("sweep.test", json!({}));
    it.lane = lane.clone();
    it.created_at = q.store().now();
    it.available_at = Some(q.store().now());
    q.enqueue_many(&Principal::system(), vec![it])
        .await
        .unwrap();
    let _ = drover::worker::prometheus();
    let sweeper = Sweeper::new(q.clone(), quick()).unwrap();
    clock.advance(Duration::from_secs(30));
    sweeper.run_once().await.unwrap();
    let series = format!("drover_queue_oldest_age_seconds{{lane=\"{lane}\"}}");
    let age = scraped(&series).expect("published");
    assert!((age - 30.0).abs() < 1.0, "age {age}");
    let batch = q
        .claim(&lane, &[], "w", Duration::from_secs(60), 1)
        .await
        .unwrap();
    q.complete(&batch.items[0]).await.unwrap();
    clock.advance(Duration::from_secs(30));
    sweeper.run_once().await.unwrap();
    assert_eq!(scraped(&series), Some(0.0), "a drained lane reads 0");
}

/// The sweep publishes each tenant's fair share of a lane as gauges (starts
/// and waiting items, by lane and tenant), and collects the idle passes
/// once the lane is drained.
#[tokio::test]
async fn the_sweep_publishes_fair_share_gauges_and_collects_idle_passes() {
    let q = Queue::new(Arc::new(MemoryStore::new()));
    let lane = format!("fair-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let (a, b) = (Uuid::from_u128(0xA1), Uuid::from_u128(0xB1));
    let items: Vec<NewItem> = [a, a, a, b, b, b]
        .into_iter()
        .map(|t| {
            let mut it = NewItem::new("sweep.test", json!({})).with_tenant(t);
            it.lane = lane.clone();
            it
        })
        .collect();
    q.store().item_insert_many(&items).await.unwrap();
    let batch = q
        .claim(&lane, &[], "w", Duration::from_secs(60), 2)
        .await
        .unwrap();
    assert_eq!(batch.items.len(), 2);
    let _ = drover::worker::prometheus();
    let sweeper = Sweeper::new(q.clone(), quick()).unwrap();
    sweeper.run_once().await.unwrap();
    for t in [a, b] {
        let started = format!("drover_fair_started{{lane=\"{lane}\",tenant=\"{t}\"}}");
        let waiting = format!("drover_fair_waiting{{lane=\"{lane}\",tenant=\"{t}\"}}");
        assert_eq!(scraped(&started), Some(1.0), "{started}");
        assert_eq!(scraped(&waiting), Some(2.0), "{waiting}");
    }
    for cx in &batch.items {
        q.complete(cx).await.unwrap();
    }
    loop {
        let batch = q
            .claim(&lane, &[], "w", Duration::from_secs(60), 4)
            .await
            .unwrap();
        if batch.items.is_empty() {
            break;
        }
        for cx in &batch.items {
            q.complete(cx).await.unwrap();
        }
    }
    let report = sweeper.run_once().await.unwrap();
    assert_eq!(
        report.fair_passes_purged, 2,
        "both tenants' passes are idle"
    );
}

/// The lease is renewed before a step only when it might pass during that
/// step: a quick pass writes its take and its release and renews nothing
/// (before: three renewals a pass, each a write that on SQLite queues for
/// the file's one write lock with the claims and completions), while a
/// pass whose step ran to its timeout still renews before the next step
/// and goes on to run it.
async fn a_pass_renews_only_a_lease_it_might_outlast(backend: &str) {
    let b = Backend::open(backend).await;
    let fault = Arc::new(FaultStore::new(b.queue.store().clone()));
    let q = Queue::new(fault.clone());
    let renewals = || fault.faults.sweep_renew_calls.load(Ordering::SeqCst);
    let roomy = SweepConfig {
        interval: Duration::from_secs(1),
        step_timeout: Duration::from_secs(5),
        lease: Duration::from_secs(30),
        ..SweepConfig::default()
    };
    let (quick_step, quick_runs) = step("quick", || async { Ok(1) });
    let sweeper = Sweeper::new(q.clone(), roomy)
        .unwrap()
        .with_step(quick_step);
    let report = sweeper.run_once().await.unwrap();
    assert!(report.swept && !report.lease_lost, "{report:?}");
    assert_eq!(quick_runs.load(Ordering::SeqCst), 1);
    assert_eq!(renewals(), 0, "a quick pass renewed its lease");

    let tight = SweepConfig {
        interval: Duration::from_secs(1),
        step_timeout: Duration::from_secs(1),
        lease: Duration::from_millis(1500),
        ..SweepConfig::default()
    };
    let (hang, hang_runs) = step("hangs", std::future::pending::<Result<u64>>);
    let (after, after_runs) = step("after", || async { Ok(1) });
    let sweeper = Sweeper::new(q.clone(), tight)
        .unwrap()
        .with_step(hang)
        .with_step(after);
    let report = sweeper.run_once().await.unwrap();
    assert!(report.swept && !report.lease_lost, "{report:?}");
    assert_eq!(hang_runs.load(Ordering::SeqCst), 1);
    assert!(
        renewals() >= 1,
        "no renewal before the step after one that ran to its timeout"
    );
    assert_eq!(
        after_runs.load(Ordering::SeqCst),
        1,
        "the step after the renewal ran"
    );
    b.finish().await;
}

/// The sweep purges expired idempotency markers (its `purge_markers`
/// step) and keeps the live ones.
#[tokio::test]
async fn the_sweep_purges_expired_idempotency_markers() {
    use drover::access::{MarkerBegin, MarkerKey};
    let clock = Arc::new(ManualClock::new());
    let q = Queue::new(Arc::new(MemoryStore::with_clock(clock.clone())));
    let key = |k: &str| MarkerKey {
        tenant_id: Uuid::nil(),
        principal: Uuid::nil(),
        route: "POST /v1/items".into(),
        key: k.into(),
    };
    let s = q.store();
    let hour = Duration::from_secs(3600);
    assert_eq!(
        s.marker_begin(&key("short"), "f", hour, hour)
            .await
            .unwrap(),
        MarkerBegin::Started
    );
    assert_eq!(
        s.marker_begin(&key("long"), "f", 48 * hour, hour)
            .await
            .unwrap(),
        MarkerBegin::Started
    );
    s.marker_finish(&key("short"), 201, "{}").await.unwrap();
    s.marker_finish(&key("long"), 201, "{}").await.unwrap();
    clock.advance(2 * hour);
    let report = Sweeper::new(q.clone(), quick())
        .unwrap()
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.markers_purged, 1, "{report:?}");
    assert!(matches!(
        s.marker_begin(&key("long"), "f", hour, hour).await.unwrap(),
        MarkerBegin::Completed { .. }
    ));
    assert_eq!(
        s.marker_begin(&key("short"), "f", hour, hour)
            .await
            .unwrap(),
        MarkerBegin::Started
    );
}
