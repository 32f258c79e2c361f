//! Maintenance without a scheduler: the sweep every worker runs on a
//! jittered timer, one sweeper at a time.
//!
//! Each tick a worker asks for the **sweep lease** (a row on the store's
//! clock, see [`SweepStore::sweep_lease_take`](crate::store::SweepStore::sweep_lease_take)).
//! The holder runs one pass: requeue stale items (tenant by tenant, each one
//! bounded conditional statement), fold settled final rows into the count
//! rollup ([`ItemStore::counts_settle`](crate::store::ItemStore::counts_settle)),
//! purge final items past retention, purge
//! the rows of workers silent for longer than
//! [`SweepConfig::worker_retention`], purge expired idempotency markers
//! ([`crate::access`]), then the steps: first the built-in parking of full
//! groups' deep backlogs ([`PARK_STEP`]), then those the host registers.
//! Every worker, holder or not, then reads the gauges and publishes them, so
//! a scrape of any worker is as fresh as its last tick.
//!
//! Invariants:
//!
//! - **Nothing stalls the sweep.** Every step runs as its own task under
//!   [`SweepConfig::step_timeout`]: a step that hangs is abandoned at its
//!   limit, a step that panics is reported, and either way the next step
//!   and the next pass run. A step still running from an earlier pass (one
//!   that blocks its thread, out of an abort's reach) is skipped, never
//!   started beside itself.
//! - **No holder keeps the lease past a bounded time.** The lease passes
//!   [`SweepConfig::lease`] after it was taken or last renewed; before
//!   each step it is renewed unless it still holds past that whole step
//!   (so a quick pass writes only its take and its release); a holder that is paused, hung or cut off loses it then, and any worker
//!   takes it on its next tick. It is released on every exit path: at the
//!   end of a pass, and from a task of its own when a pass is dropped.
//! - **A second sweeper only duplicates work.** Every step is idempotent and
//!   every item write is fenced on the item's own state in its statement, so
//!   a holder that lost the lease mid-step and a new holder overlapping it
//!   make no wrong write; a holder resumed past its lease renews before
//!   its next step, and that renewal (fenced on the lease's token) ends
//!   the stale pass.
//! - **Asking costs a read.** The stores answer a take while another's
//!   lease runs from a read where a write would take a lock claims need
//!   (SQLite's one write lock), and a purge with nothing to delete writes
//!   nothing.
//!
//! The sweep as a worker role lives here too: its [`Service`](crate::worker::Service),
//! its knobs as the builder keeps them (`SweepKnobs`: on, and the steps
//! added), its role row, and the builder calls
//! ([`sweep_step`](crate::worker::WorkerBuilder::sweep_step),
//! [`without_sweep`](crate::worker::WorkerBuilder::without_sweep)). The
//! worker names no role; the default roles are assembled above both
//! (`crate::defaults`).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;

use crate::error::{Error, ErrorKind, Result};
use crate::queue::{Queue, STALE_BATCH_DEFAULT};
use crate::store::Gauges;

mod lease;
mod parking;

pub use parking::PARK_STEP;

use lease::{Held, LeaseGuard};

// The interval and retentions are worker settings (`DROVER_SWEEP_INTERVAL`,
// `DROVER_ITEM_RETENTION`): their defaults live with the settings table,
// below the sweep, and keep their paths here.
pub use crate::worker::{ITEM_RETENTION_DEFAULT, SWEEP_INTERVAL_DEFAULT, WORKER_RETENTION_DEFAULT};
// What the sweep declares keeps its path in `worker` too, where it was
// first published; the role row that names it is built here.
pub use crate::worker::SWEEP_STRATEGY;
/// How many stale items one tenant's requeue takes per run by default.
pub const STALE_LIMIT_DEFAULT: u32 = STALE_BATCH_DEFAULT;
/// The sweep interval varies by this fraction either way, so workers
/// started together do not sweep in lockstep.
pub const SWEEP_JITTER: f64 = 0.2;
/// Each step's time limit by default: two thirds of the default interval,
/// so a pass whose one step hangs still ends before the next is due.
pub const SWEEP_STEP_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// The shortest step timeout [`SweepConfig::every`] scales to: a short
/// interval (tests, demos) must not cut off a requeue that is merely slow
/// on a loaded database.
pub const SWEEP_STEP_TIMEOUT_MIN: Duration = Duration::from_secs(1);
/// How long the sweep lease holds without renewal by default: twice the
/// default interval. A stalled sweeper's right to sweep passes after this.
pub const SWEEP_LEASE_DEFAULT: Duration = Duration::from_secs(30);

/// A step the host adds to the sweep.
///
/// It runs in the lease holder's pass, as its own task, under the sweep's
/// step timeout: it must be idempotent (a holder that lost the lease mid-step
/// may overlap the next holder) and should return well within the timeout.
pub trait SweepStep: Send + Sync + 'static {
    /// The step's name in logs and reports.
    fn name(&self) -> &str;
    /// Runs once; returns how many things it did.
    fn run<'a>(
        &'a self,
        queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>>;
}

/// The sweep's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    /// The mean interval between the starts of two ticks. Default
    /// [`SWEEP_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Final items older than this are purged. Default [`ITEM_RETENTION_DEFAULT`].
    pub retention: Duration,
    /// Stale items per tenant per run. Default [`STALE_LIMIT_DEFAULT`].
    pub stale_limit: u32,
    /// The longest one step (and one lease or gauge call) may run. Default
    /// [`SWEEP_STEP_TIMEOUT_DEFAULT`].
    pub step_timeout: Duration,
    /// How long the sweep lease holds without renewal; it is renewed before
    /// a step it might not outlast, so it must exceed `step_timeout`. Default
    /// [`SWEEP_LEASE_DEFAULT`].
    pub lease: Duration,
    /// Rows of workers silent for longer than this are purged. Default
    /// [`WORKER_RETENTION_DEFAULT`].
    pub worker_retention: Duration,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            interval: SWEEP_INTERVAL_DEFAULT,
            retention: ITEM_RETENTION_DEFAULT,
            stale_limit: STALE_LIMIT_DEFAULT,
            step_timeout: SWEEP_STEP_TIMEOUT_DEFAULT,
            lease: SWEEP_LEASE_DEFAULT,
            worker_retention: WORKER_RETENTION_DEFAULT,
        }
    }
}

impl SweepConfig {
    /// The defaults with `interval`, and the step timeout and lease scaled
    /// to it as the defaults are to theirs (two thirds and twice), the step
    /// timeout never below [`SWEEP_STEP_TIMEOUT_MIN`] and the lease always
    /// an interval past it: how a worker builds its sweep from
    /// `DROVER_SWEEP_INTERVAL`.
    pub fn every(interval: Duration) -> Self {
        let step_timeout = (interval * 2 / 3).max(SWEEP_STEP_TIMEOUT_MIN);
        SweepConfig {
            interval,
            step_timeout,
            lease: (interval * 2).max(step_timeout + interval),
            ..SweepConfig::default()
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default)]
pub struct SweepReport {
    /// False when another worker held the sweep lease (no pass was run;
    /// the gauges were still read).
    pub swept: bool,
    /// True when this pass lost the lease (it passed while a step ran) and
    /// stopped early.
    pub lease_lost: bool,
    /// Stale items made pending again.
    pub requeued: u64,
    /// Stale items dead-lettered (budget spent).
    pub dead_lettered: u64,
    /// Final rows folded into the store's count rollup (PostgreSQL).
    pub counts_settled: u64,
    /// Final items purged.
    pub purged: u64,
    /// Rows of long-dead workers purged.
    pub workers_purged: u64,
    /// Expired idempotency markers deleted.
    pub markers_purged: u64,
    /// Idle rate cells deleted (cells behind the clock: the same as none).
    pub rate_cells_purged: u64,
    /// Idle fair-share passes deleted (at or behind their lane's virtual
    /// time, or of a tenant with nothing pending in the lane).
    pub fair_passes_purged: u64,
    /// The gauges read.
    pub gauges: Option<Gauges>,
    /// When the last completed pass (of any process) ended, as read.
    pub last_pass: Option<DateTime<Utc>>,
    /// Each step that failed, timed out or panicked, with what happened.
    pub errors: Vec<(String, String)>,
    /// Each host step that ran, with its count.
    pub steps: Vec<(String, u64)>,
}

/// The sweeper service.
pub struct Sweeper {
    queue: Queue,
    config: SweepConfig,
    steps: Vec<Arc<dyn SweepStep>>,
    /// Who this sweeper is in the lease row.
    holder: String,
    /// Steps whose last run outlived its timeout, by name: an abort reaches
    /// a task only at an await, so one that blocks its thread runs on.
    lingering: Mutex<HashMap<String, AbortHandle>>,
    /// Lanes this sweeper has published an oldest-age gauge for.
    lanes: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for Sweeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("config", &self.config)
            .field("holder", &self.holder)
            .field(
                "steps",
                &self
                    .steps
                    .iter()
                    .map(|s| s.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// How a guarded step went wrong.
#[derive(Debug)]
enum StepError {
    /// It returned an error.
    Failed(Error),
    /// It panicked, with this message.
    Panicked(String),
    /// It overran the step timeout and was abandoned.
    TimedOut(Duration),
    /// Its run from an earlier pass is still going.
    Lingering,
    /// Its task was cancelled from outside.
    Cancelled,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Failed(e) => write!(f, "{e}"),
            StepError::Panicked(m) => write!(f, "panicked: {m}"),
            StepError::TimedOut(d) => write!(f, "timed out after {d:?}"),
            StepError::Lingering => f.write_str(
                "skipped: its run from an earlier pass is still going (it blocks its thread?)",
            ),
            StepError::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// The message of a panic payload, when it carries one.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

impl Sweeper {
    /// A sweeper over `queue`.
    ///
    /// # Errors
    /// [`Error::Config`] for a zero interval, stale limit or step timeout,
    /// or a lease that does not exceed the step timeout.
    pub fn new(queue: Queue, config: SweepConfig) -> Result<Self> {
        if config.interval.is_zero() {
            return Err(Error::Config(
                "the sweep interval must be longer than zero".into(),
            ));
        }
        if config.stale_limit == 0 {
            return Err(Error::Config("the stale limit must be at least 1".into()));
        }
        if config.worker_retention.is_zero() {
            // Zero would delete live workers' rows between their beats.
            return Err(Error::Config(
                "the worker retention must be longer than zero".into(),
            ));
        }
        if config.step_timeout.is_zero() {
            return Err(Error::Config(
                "the sweep step timeout must be longer than zero".into(),
            ));
        }
        if config.lease <= config.step_timeout {
            return Err(Error::Config(format!(
                "the sweep lease ({:?}) must exceed the sweep step timeout ({:?}), so a step \
                 that runs to its limit ends with the lease still held",
                config.lease, config.step_timeout
            )));
        }
        let holder = format!(
            "sweeper:{}:{}",
            std::process::id(),
            &Uuid::new_v4().simple().to_string()[..8]
        );
        Ok(Sweeper {
            queue,
            config,
            // Parking is built in, reported among the steps (`PARK_STEP`).
            steps: vec![Arc::new(parking::ParkStep)],
            holder,
            lingering: Mutex::new(HashMap::new()),
            lanes: Mutex::new(BTreeSet::new()),
        })
    }

    /// Adds a host step, run after the built-in ones.
    pub fn with_step(mut self, step: Box<dyn SweepStep>) -> Self {
        self.steps.push(Arc::from(step));
        self
    }

    /// The name this sweeper holds the lease under
    /// (`sweeper:<pid>:<random>`).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Runs `fut` as its own task under the step timeout: its error, panic
    /// or overrun becomes the `Err` message, never the caller's.
    /// A step that counts what it did: the count, or 0 with the step's
    /// error recorded.
    async fn counted(
        &self,
        name: &str,
        errors: &mut Vec<(String, String)>,
        fut: impl Future<Output = Result<u64>> + Send + 'static,
    ) -> u64 {
        self.guarded(name, fut).await.unwrap_or_else(|e| {
            errors.push((name.to_owned(), e.to_string()));
            0
        })
    }

    async fn guarded<T: Send + 'static>(
        &self,
        name: &str,
        fut: impl Future<Output = Result<T>> + Send + 'static,
    ) -> std::result::Result<T, StepError> {
        {
            let mut lingering = self.lingering.lock().unwrap_or_else(|p| p.into_inner());
            match lingering.get(name) {
                Some(h) if !h.is_finished() => return Err(StepError::Lingering),
                Some(_) => {
                    lingering.remove(name);
                }
                None => {}
            }
        }
        // Aborted if this pass is dropped, so a step never outlives its pass
        // unnoticed.
        let mut task = AbortOnDropHandle::new(tokio::spawn(fut));
        match tokio::time::timeout(self.config.step_timeout, &mut task).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => Err(StepError::Failed(e)),
            Ok(Err(e)) if e.is_panic() => Err(StepError::Panicked(panic_message(e.into_panic()))),
            Ok(Err(_)) => Err(StepError::Cancelled),
            Err(_) => {
                task.abort();
                self.lingering
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.to_owned(), task.abort_handle());
                Err(StepError::TimedOut(self.config.step_timeout))
            }
        }
    }

    /// Runs one tick: a pass if this process gets the sweep lease, then the
    /// gauges whether or not it did.
    ///
    /// # Errors
    /// Only when the lease itself cannot be asked for (the gauges are still
    /// read); step failures are in the report.
    ///
    /// # Cancel safety
    /// Dropping the future aborts the running step and releases the lease
    /// from a task of its own.
    pub async fn run_once(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        let store = self.queue.store().clone();
        // Taken before the request is sent, so the local view of the lease
        // never outlasts the store's.
        let asked = tokio::time::Instant::now();
        let taken = match tokio::time::timeout(
            self.config.step_timeout,
            store.sweep_lease_take(&self.holder, self.config.lease),
        )
        .await
        {
            Ok(r) => r,
            Err(elapsed) => Err(Error::Unavailable(crate::error::Opaque::new(elapsed))),
        };
        let token = match taken {
            Ok(t) => t,
            Err(e) => {
                self.refresh(&mut report).await;
                self.log_errors(&report);
                return Err(e);
            }
        };
        if let Some(token) = token {
            report.swept = true;
            let lease = LeaseGuard {
                store: store.clone(),
                token: Some(token),
                timeout: self.config.step_timeout,
            };
            let mut held = Held {
                token,
                until: asked + self.config.lease,
            };
            let completed = self.pass(&mut held, &mut report).await;
            if !lease.release(completed).await && !report.lease_lost {
                // It passed during the last step: another worker may have
                // swept meanwhile (harmless: every step is idempotent).
                report.lease_lost = true;
                report.errors.push((
                    "sweep_lease".into(),
                    "the sweep lease is no longer held: it passed before the pass ended".into(),
                ));
            }
        }
        self.refresh(&mut report).await;
        self.log_errors(&report);
        Ok(report)
    }

    /// The holder's pass; false when it lost the lease and stopped early.
    async fn pass(&self, held: &mut Held, report: &mut SweepReport) -> bool {
        let q = self.queue.clone();
        let limit = self.config.stale_limit;
        match self
            .guarded("requeue_stale", async move { q.requeue_stale(limit).await })
            .await
        {
            Ok(r) => {
                report.requeued = r.requeued;
                report.dead_lettered = r.dead_lettered;
                if r.requeued + r.dead_lettered > 0 {
                    tracing::info!(
                        requeued = r.requeued,
                        dead_lettered = r.dead_lettered,
                        "sweep handed back lease-expired items"
                    );
                }
            }
            Err(e) => report.errors.push(("requeue_stale".into(), e.to_string())),
        }
        if !self.renew(held, report).await {
            return false;
        }
        let store = self.queue.store().clone();
        report.counts_settled = self
            .counted("counts_settle", &mut report.errors, async move {
                store.counts_settle().await
            })
            .await;
        if !self.renew(held, report).await {
            return false;
        }
        let q = self.queue.clone();
        let retention = self.config.retention;
        report.purged = self
            .counted("purge", &mut report.errors, async move {
                q.purge(retention).await
            })
            .await;
        if !self.renew(held, report).await {
            return false;
        }
        let store = self.queue.store().clone();
        let worker_retention = self.config.worker_retention;
        report.workers_purged = self
            .counted("purge_workers", &mut report.errors, async move {
                store.worker_purge(worker_retention).await
            })
            .await;
        if !self.renew(held, report).await {
            return false;
        }
        let store = self.queue.store().clone();
        report.markers_purged = self
            .counted("purge_markers", &mut report.errors, async move {
                store
                    .marker_purge(crate::store::access::MARKER_PURGE_BATCH_DEFAULT)
                    .await
            })
            .await;
        if !self.renew(held, report).await {
            return false;
        }
        let store = self.queue.store().clone();
        report.rate_cells_purged = self
            .counted("purge_rate_cells", &mut report.errors, async move {
                store
                    .rate_cells_purge(crate::store::rates::RATE_CELLS_PURGE_BATCH)
                    .await
            })
            .await;
        if !self.renew(held, report).await {
            return false;
        }
        let store = self.queue.store().clone();
        report.fair_passes_purged = self
            .counted("purge_fair_passes", &mut report.errors, async move {
                store
                    .fair_passes_purge(crate::store::fairness::FAIR_PASSES_PURGE_BATCH)
                    .await
            })
            .await;
        for step in &self.steps {
            if !self.renew(held, report).await {
                return false;
            }
            let (s, q) = (step.clone(), self.queue.clone());
            match self
                .guarded(step.name(), async move { s.run(&q).await })
                .await
            {
                Ok(n) => report.steps.push((step.name().to_owned(), n)),
                Err(e) => report.errors.push((step.name().to_owned(), e.to_string())),
            }
        }
        true
    }

    /// Makes sure the lease outlasts the next step, renewing it when it
    /// might not; false when it is lost (the pass stops: another worker may
    /// hold it now). A renewal that fails for another reason is reported
    /// and the pass goes on: at worst the lease passes and a second sweeper
    /// duplicates idempotent work.
    ///
    /// No write when the lease, as last set, still holds past the whole
    /// next step (a step never outruns the step timeout): nobody else can
    /// take it before then, so the write would change nothing, and on
    /// SQLite every write queues for the file's one write lock with the
    /// claims, renewals and completions. A holder that stalled (paused,
    /// hung) is past that point when it resumes, so it renews, is refused
    /// and stops, as before.
    async fn renew(&self, held: &mut Held, report: &mut SweepReport) -> bool {
        let sent = tokio::time::Instant::now();
        if sent + self.config.step_timeout < held.until {
            return true;
        }
        let store = self.queue.store().clone();
        let (token, lease) = (held.token, self.config.lease);
        match self
            .guarded("sweep_lease", async move {
                store.sweep_lease_renew(token, lease).await
            })
            .await
        {
            Ok(()) => {
                held.until = sent + lease;
                true
            }
            Err(StepError::Failed(e)) if e.kind() == ErrorKind::Conflict => {
                report.lease_lost = true;
                report.errors.push(("sweep_lease".into(), e.to_string()));
                false
            }
            Err(e) => {
                report.errors.push(("sweep_lease".into(), e.to_string()));
                true
            }
        }
    }

    /// Reads and publishes the gauges and the last completed pass.
    async fn refresh(&self, report: &mut SweepReport) {
        let q = self.queue.clone();
        match self
            .guarded("gauges", async move { q.gauges().await })
            .await
        {
            Ok(g) => {
                self.publish(&g);
                // One writer per pass: the process that swept (every
                // process reads the gauges for its own metrics).
                if report.swept {
                    self.record_waits(&g, report).await;
                }
                report.gauges = Some(g);
            }
            Err(e) => report.errors.push(("gauges".into(), e.to_string())),
        }
        let store = self.queue.store().clone();
        match self
            .guarded(
                "sweep_last_pass",
                async move { store.sweep_last_pass().await },
            )
            .await
        {
            Ok(Some(at)) => {
                metrics::gauge!("drover_sweep_last_run_timestamp_seconds")
                    .set(at.timestamp_micros() as f64 / 1e6);
                report.last_pass = Some(at);
            }
            Ok(None) => {}
            Err(e) => report
                .errors
                .push(("sweep_last_pass".into(), e.to_string())),
        }
        // For the alert rules (deploy/prometheus/drover-rules.yaml): a held
        // xmin blocks vacuum and bloats the hot table. PostgreSQL only.
        let store = self.queue.store().clone();
        match self
            .guarded("db_oldest_xact_age", async move {
                store.db_oldest_xact_age().await
            })
            .await
        {
            Ok(Some(age)) => {
                metrics::gauge!("drover_db_oldest_xact_age_seconds").set(age.as_secs_f64());
            }
            Ok(None) => {}
            Err(e) => report
                .errors
                .push(("db_oldest_xact_age".into(), e.to_string())),
        }
        // Every sweeper publishes it, workflows registered here or not: the
        // alert on parked orchestrations reads whichever instance swept.
        let store = self.queue.store().clone();
        match self
            .guarded("records_parked", async move {
                store.orchestration_parked_count().await
            })
            .await
        {
            Ok(n) => metrics::gauge!("drover_records_parked").set(n as f64),
            Err(e) => report.errors.push(("records_parked".into(), e.to_string())),
        }
        let queue = self.queue.clone();
        let limits = self.guarded(
            "limit_gauges",
            async move { queue.publish_limit_gauges().await },
        );
        if let Err(e) = limits.await {
            report.errors.push(("limit_gauges".into(), e.to_string()));
        }
        let queue = self.queue.clone();
        let fair = self.guarded(
            "fair_gauges",
            async move { queue.publish_fair_gauges().await },
        );
        if let Err(e) = fair.await {
            report.errors.push(("fair_gauges".into(), e.to_string()));
        }
    }

    /// Records the oldest waiting age per lane for the dashboard's queue
    /// wait chart (migration 0049), from the gauges just read: the history
    /// costs one upsert per pass, nothing on the claim path.
    async fn record_waits(&self, g: &Gauges, report: &mut SweepReport) {
        let store = self.queue.store().clone();
        let ages = g.oldest_age_seconds.clone();
        let recorded = self
            .guarded("queue_waits", async move {
                let at = store.db_now().await?;
                store.wait_record(at, &ages).await
            })
            .await;
        if let Err(e) = recorded {
            report.errors.push(("queue_waits".into(), e.to_string()));
        }
    }

    /// Sets the gauges; a lane published before and absent now (nothing
    /// pending in it) reads 0 rather than its last value.
    fn publish(&self, g: &Gauges) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let now: BTreeSet<&str> = g
            .oldest_age_seconds
            .iter()
            .map(|(l, _)| l.as_str())
            .collect();
        for lane in lanes.iter().filter(|l| !now.contains(l.as_str())) {
            metrics::gauge!("drover_queue_oldest_age_seconds", "lane" => lane.clone()).set(0.0);
        }
        for (lane, age) in &g.oldest_age_seconds {
            metrics::gauge!("drover_queue_oldest_age_seconds", "lane" => lane.clone()).set(*age);
            lanes.insert(lane.clone());
        }
        metrics::gauge!("drover_work_failed").set(g.failed as f64);
    }

    fn log_errors(&self, report: &SweepReport) {
        for (step, err) in &report.errors {
            tracing::warn!(step, error = err, "sweep step failed");
            metrics::counter!("drover_sweep_step_failures_total", "step" => step.clone())
                .increment(1);
        }
    }

    /// Runs a tick every jittered interval (from one tick's start to the
    /// next: a pass that overran starts the next tick at once) until `stop`.
    ///
    /// # Cancel safety
    /// `stop` ends a pass in flight: its step is aborted and the lease
    /// released.
    pub async fn run(&self, stop: CancellationToken) {
        let jittered = |d: Duration| {
            let jitter = 1.0 + SWEEP_JITTER * (2.0 * rand::random::<f64>() - 1.0);
            d.mul_f64(jitter)
        };
        let mut next = tokio::time::Instant::now() + jittered(self.config.interval);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(next) => {}
            }
            next = tokio::time::Instant::now() + jittered(self.config.interval);
            tokio::select! {
                () = stop.cancelled() => return,
                r = self.run_once() => {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "sweep skipped");
                    }
                }
            }
        }
    }
}

/// The sweep as a worker role: run every sweep interval until the worker
/// stops.
impl crate::worker::Service for Sweeper {
    fn run(
        self: Box<Self>,
        cx: crate::worker::ServiceContext,
    ) -> Result<crate::worker::ServiceFuture> {
        Ok(Box::pin(async move { Sweeper::run(&self, cx.stop).await }))
    }
}

/// The sweep's knobs, as the builder's calls left them: on unless
/// `without_sweep`, with the host's (and the roles') steps in call order.
pub(crate) struct SweepKnobs {
    /// False after `without_sweep`.
    pub(crate) on: bool,
    /// Steps added to the built-in ones.
    pub(crate) steps: Vec<Box<dyn SweepStep>>,
}

impl Default for SweepKnobs {
    fn default() -> Self {
        SweepKnobs {
            on: true,
            steps: Vec::new(),
        }
    }
}

impl crate::worker::RoleKnobs for SweepKnobs {}

/// The sweep's role row, naming its steps.
pub(crate) fn sweep_role(steps: &[String]) -> crate::worker::RoleInfo {
    let steps = if steps.is_empty() {
        "the built-in steps only".to_owned()
    } else {
        format!("the built-in steps, then {}", steps.join(", "))
    };
    crate::worker::RoleInfo::new("sweep", "sweep", SWEEP_STRATEGY).with(
        "steps",
        format!(
            "requeue stale items, settle counts, purge final items past retention, purge \
             silent workers and expired idempotency markers, park full groups' deep \
             backlogs; {steps}"
        ),
    )
}

impl crate::worker::WorkerBuilder {
    /// Adds a host step to the sweep.
    pub fn sweep_step(self, step: Box<dyn SweepStep>) -> Self {
        self.knobs(|k: &mut SweepKnobs| k.steps.push(step))
    }

    /// Turns this worker's sweep off (another process sweeps).
    pub fn without_sweep(self) -> Self {
        self.knobs(|k: &mut SweepKnobs| k.on = false)
    }
}
