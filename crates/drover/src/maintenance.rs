//! Maintenance without a scheduler: the sweep every worker runs on a
//! jittered timer, one sweeper at a time (an advisory lock on PostgreSQL).
//!
//! Every step is idempotent and wrapped: one failing step is logged and
//! reported, and the others still run. Steps: requeue stale items (tenant by
//! tenant, each one bounded conditional statement), purge final items past
//! retention, set the gauges, then the steps the host registers.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::queue::{Queue, STALE_BATCH_DEFAULT};
use crate::store::Gauges;

/// How often the sweep runs by default.
pub const SWEEP_INTERVAL_DEFAULT: Duration = crate::worker::SWEEP_INTERVAL_DEFAULT;
/// How long final items are kept by default.
pub const ITEM_RETENTION_DEFAULT: Duration = crate::worker::ITEM_RETENTION_DEFAULT;
/// How many stale items one tenant's requeue takes per run by default.
pub const STALE_LIMIT_DEFAULT: u32 = STALE_BATCH_DEFAULT;
/// The sweep interval varies by this fraction either way, so workers
/// started together do not sweep in lockstep.
pub const SWEEP_JITTER: f64 = 0.2;

/// A step the host adds to the sweep.
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
    /// The mean interval. Default [`SWEEP_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Final items older than this are purged. Default [`ITEM_RETENTION_DEFAULT`].
    pub retention: Duration,
    /// Stale items per tenant per run. Default [`STALE_LIMIT_DEFAULT`].
    pub stale_limit: u32,
}

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            interval: SWEEP_INTERVAL_DEFAULT,
            retention: ITEM_RETENTION_DEFAULT,
            stale_limit: STALE_LIMIT_DEFAULT,
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default)]
pub struct SweepReport {
    /// False when another worker held the sweep lock (nothing was done).
    pub swept: bool,
    /// Stale items made pending again.
    pub requeued: u64,
    /// Stale items dead-lettered (budget spent).
    pub dead_lettered: u64,
    /// Final items purged.
    pub purged: u64,
    /// The gauges read.
    pub gauges: Option<Gauges>,
    /// Each step that failed, with its error.
    pub errors: Vec<(String, String)>,
    /// Each host step that ran, with its count.
    pub steps: Vec<(String, u64)>,
}

/// The sweeper service.
pub struct Sweeper {
    queue: Queue,
    config: SweepConfig,
    steps: Vec<Box<dyn SweepStep>>,
}

impl std::fmt::Debug for Sweeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("config", &self.config)
            .field(
                "steps",
                &self
                    .steps
                    .iter()
                    .map(|s| s.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Sweeper {
    /// A sweeper over `queue`.
    ///
    /// # Errors
    /// [`Error::Config`] for a zero interval or stale limit.
    pub fn new(queue: Queue, config: SweepConfig) -> Result<Self> {
        if config.interval.is_zero() {
            return Err(Error::Config(
                "the sweep interval must be longer than zero".into(),
            ));
        }
        if config.stale_limit == 0 {
            return Err(Error::Config("the stale limit must be at least 1".into()));
        }
        Ok(Sweeper {
            queue,
            config,
            steps: Vec::new(),
        })
    }

    /// Adds a host step, run after the built-in ones.
    pub fn with_step(mut self, step: Box<dyn SweepStep>) -> Self {
        self.steps.push(step);
        self
    }

    /// Runs every step once if this process gets the sweep lock.
    ///
    /// # Errors
    /// Only when the lock itself cannot be asked for; step failures are in
    /// the report.
    pub async fn run_once(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        let store = self.queue.store();
        if !store.sweep_try_lock().await? {
            return Ok(report);
        }
        report.swept = true;
        match self.queue.requeue_stale(self.config.stale_limit).await {
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
        match self.queue.purge(self.config.retention).await {
            Ok(n) => report.purged = n,
            Err(e) => report.errors.push(("purge".into(), e.to_string())),
        }
        match self.queue.gauges().await {
            Ok(g) => {
                for (lane, age) in &g.oldest_age_seconds {
                    metrics::gauge!("drover_queue_oldest_age_seconds", "lane" => lane.clone())
                        .set(*age);
                }
                metrics::gauge!("drover_work_failed").set(g.failed as f64);
                report.gauges = Some(g);
            }
            Err(e) => report.errors.push(("gauges".into(), e.to_string())),
        }
        if let Err(e) = record_operations_gauges(&self.queue).await {
            report
                .errors
                .push(("operations_gauges".into(), e.to_string()));
        }
        for step in &self.steps {
            match step.run(&self.queue).await {
                Ok(n) => report.steps.push((step.name().to_owned(), n)),
                Err(e) => report.errors.push((step.name().to_owned(), e.to_string())),
            }
        }
        for (step, err) in &report.errors {
            tracing::warn!(step, error = err, "sweep step failed");
        }
        if let Err(e) = store.sweep_unlock().await {
            tracing::warn!(error = %e, "sweep unlock failed");
        }
        Ok(report)
    }

    /// Runs on a jittered interval until `stop`.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            let jitter = 1.0 + SWEEP_JITTER * (2.0 * rand::random::<f64>() - 1.0);
            let wait = self.config.interval.mul_f64(jitter);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            if let Err(e) = self.run_once().await {
                tracing::warn!(error = %e, "sweep skipped");
            }
        }
    }
}

/// The gauges the alert rules need beyond the queue's own
/// (`deploy/prometheus/drover-rules.yaml`): when this worker last swept
/// (`drover_sweep_last_run_timestamp_seconds`, Unix seconds) and, on
/// PostgreSQL, the age of the oldest open transaction in the database
/// (`drover_db_oldest_xact_age_seconds`: a held xmin blocks vacuum and
/// bloats the hot table). Set only by the worker holding the sweep lock.
async fn record_operations_gauges(queue: &Queue) -> Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    metrics::gauge!("drover_sweep_last_run_timestamp_seconds").set(now);
    if let Some(age) = queue.store().db_oldest_xact_age().await? {
        metrics::gauge!("drover_db_oldest_xact_age_seconds").set(age.as_secs_f64());
    }
    Ok(())
}
