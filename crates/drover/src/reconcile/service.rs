//! The reconciler service: for each tenant it serves, it reads the
//! checkpoint, pulls the next batch of changes after it from the
//! [`Source`], and applies the batch with the checkpoint past it in one
//! transaction ([`ReconcileStore::reconcile_apply`]).
//!
//! Invariants: the cursor handed to the source is always a committed one,
//! so a run killed anywhere (while pulling, mid-batch, before the commit)
//! leaves the checkpoint where it was and the next run pulls the same
//! changes again; a run that lost the checkpoint's compare-and-set to
//! another runner changes nothing and is not an error. Every tenant runs
//! on every pass whatever the others did: a tenant whose run fails (an
//! error, or a panic in the source, contained as a failed run) is counted,
//! reported and retried after its own growing backoff, and a reconciler
//! with failing tenants is named by the worker's `/healthz` until they
//! recover. Tombstones (records the source deleted) are purged once older
//! than the retention.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::backoff::{Backoff, TenantFailure};
use super::{Change, ReconcilerStrategy, validate_key, validate_name};
use crate::error::{Error, Opaque, Result};
use crate::queue::Queue;
use crate::store::reconcile::{ApplyBatch, ApplyReport};
use crate::worker::Health;

/// The longest wait between two runs once the source is drained.
pub const RECONCILE_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);
/// Each wait is lengthened by a random delay up to this, so workers running
/// the same reconciler do not all pull at once.
pub const RECONCILE_JITTER_DEFAULT: Duration = Duration::from_millis(500);
/// How many changes one batch asks the source for.
pub const RECONCILE_BATCH_DEFAULT: u32 = 500;
/// The most changes one batch may ask for (one transaction holds them all).
pub const RECONCILE_BATCH_MAX: u32 = 10_000;
/// A failing tenant's first wait before its next run; doubled per failure
/// in a row.
pub const RECONCILE_BACKOFF_BASE_DEFAULT: Duration = Duration::from_secs(1);
/// The longest wait of a failing tenant.
pub const RECONCILE_BACKOFF_CAP_DEFAULT: Duration = Duration::from_secs(300);
/// How long a tombstone (a record the source deleted, not changed locally
/// since, nothing parked) is kept before it is purged.
pub const RECONCILE_RETENTION_DEFAULT: Duration = Duration::from_secs(7 * 24 * 3600);
/// Tombstones purged per call (one statement; the next pass takes more).
pub const RECONCILE_PURGE_LIMIT: u32 = 1_000;

/// What a reconciler declares for idempotency, on top of its conflict
/// strategy: the framework's guarantee, the same for every reconciler.
pub const RECONCILER_IDEMPOTENCY: &str = "a change at or below the source version a record \
    already took is a replay and changes nothing; a batch lands with its checkpoint's \
    compare-and-set, so of two runners pulling the same batch one applies it";
/// What a reconciler declares for retry.
pub const RECONCILER_RETRY: &str = "a failed or panicking run of a tenant changes nothing and \
    is retried after that tenant's own backoff (doubling from 1 s, capped at 5 min by \
    default); the other tenants run on time";
/// What a reconciler declares for recovery.
pub const RECONCILER_RECOVERY: &str = "a run killed anywhere leaves the committed checkpoint, \
    and the next run (this worker's or another's) pulls the same batch again from it";

/// A source failed to answer; the run changes nothing and tries again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the source failed: {0}")]
pub struct SourceError(pub String);

/// What a source hands back for one pull.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceBatch {
    /// The changes after the cursor, in the source's order (at most the
    /// limit asked for; empty when there is nothing new).
    pub changes: Vec<Change>,
    /// The cursor after the last change (required when there are changes).
    pub cursor: Option<String>,
}

/// The external system a reconciler follows, supplied by the user.
#[async_trait]
pub trait Source: Send + Sync + 'static {
    /// The changes of `tenant` after `cursor` (`None`: from the start), at
    /// most `limit`. Pulling the same cursor twice must hand back the same
    /// changes or later versions of them.
    async fn pull(
        &self,
        tenant: Uuid,
        cursor: Option<&str>,
        limit: u32,
    ) -> std::result::Result<SourceBatch, SourceError>;
}

/// The reconciler's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconcilerConfig {
    /// Wait between runs once drained. Default [`RECONCILE_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Random extra wait. Default [`RECONCILE_JITTER_DEFAULT`].
    pub jitter: Duration,
    /// Changes per batch, 1 to [`RECONCILE_BATCH_MAX`]. Default
    /// [`RECONCILE_BATCH_DEFAULT`].
    pub batch_size: u32,
    /// The tenants it serves. Default: the nil tenant only.
    pub tenants: Vec<Uuid>,
    /// A failing tenant's first wait. Default
    /// [`RECONCILE_BACKOFF_BASE_DEFAULT`].
    pub backoff_base: Duration,
    /// A failing tenant's longest wait. Default
    /// [`RECONCILE_BACKOFF_CAP_DEFAULT`].
    pub backoff_cap: Duration,
    /// How long tombstones are kept. Default
    /// [`RECONCILE_RETENTION_DEFAULT`].
    pub retention: Duration,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            interval: RECONCILE_INTERVAL_DEFAULT,
            jitter: RECONCILE_JITTER_DEFAULT,
            batch_size: RECONCILE_BATCH_DEFAULT,
            tenants: vec![Uuid::nil()],
            backoff_base: RECONCILE_BACKOFF_BASE_DEFAULT,
            backoff_cap: RECONCILE_BACKOFF_CAP_DEFAULT,
            retention: RECONCILE_RETENTION_DEFAULT,
        }
    }
}

impl ReconcilerConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.interval.is_zero() {
            return Err(Error::Config(
                "the reconciler interval must be longer than zero".into(),
            ));
        }
        if self.batch_size == 0 || self.batch_size > RECONCILE_BATCH_MAX {
            return Err(Error::Config(format!(
                "the reconciler batch size must be 1 to {RECONCILE_BATCH_MAX}"
            )));
        }
        if self.backoff_base.is_zero() || self.backoff_cap < self.backoff_base {
            return Err(Error::Config(
                "the reconciler backoff base must be longer than zero and at most its cap".into(),
            ));
        }
        if self.retention.is_zero() {
            return Err(Error::Config(
                "the reconciler retention must be longer than zero".into(),
            ));
        }
        if self.tenants.is_empty() {
            return Err(Error::Config(
                "the reconciler must serve at least one tenant".into(),
            ));
        }
        Ok(())
    }
}

/// What one batch of one tenant did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// The tenant.
    pub tenant_id: Uuid,
    /// Changes pulled.
    pub pulled: u64,
    /// What applying them did (all zero when nothing was pulled).
    pub applied: ApplyReport,
    /// Another runner moved the checkpoint first: nothing changed.
    pub raced: bool,
}

/// What one run over every tenant did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// One entry per tenant whose run succeeded.
    pub batches: Vec<BatchReport>,
    /// The tenants whose run failed this pass (each counted in
    /// `drover_reconcile_failed_total` and backed off).
    pub failed: Vec<TenantFailure>,
    /// The tenants skipped this pass: still waiting out their backoff.
    pub waiting: Vec<Uuid>,
    /// Some tenant's batch was full: more may wait.
    pub more: bool,
}

/// A sync reconciler: a name, a source, a declared strategy and settings.
pub struct Reconciler {
    queue: Queue,
    name: String,
    source: Arc<dyn Source>,
    strategy: ReconcilerStrategy,
    config: ReconcilerConfig,
    backoff: Mutex<Backoff>,
    /// The worker's health once a worker runs it.
    pub(super) health: OnceLock<Arc<Health>>,
}

/// The message of a panic's payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("name", &self.name)
            .field("strategy", &self.strategy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Reconciler {
    /// A reconciler named `name` following `source`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a bad name; [`Error::Config`] for a blank
    /// declared strategy or bad settings.
    pub fn new(
        queue: Queue,
        name: impl Into<String>,
        source: Arc<dyn Source>,
        strategy: ReconcilerStrategy,
        config: ReconcilerConfig,
    ) -> Result<Self> {
        let name = name.into();
        validate_name(&name)?;
        strategy.check(&name)?;
        config.validate()?;
        Ok(Reconciler {
            queue,
            name,
            source,
            strategy,
            config,
            backoff: Mutex::new(Backoff::default()),
            health: OnceLock::new(),
        })
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Backoff> {
        // The book is plain data: a panic elsewhere cannot leave it torn.
        self.backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The tenants whose last run failed, by tenant.
    pub fn failing(&self) -> Vec<TenantFailure> {
        self.book().failing()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its declared strategy.
    pub fn strategy(&self) -> ReconcilerStrategy {
        self.strategy
    }

    /// Its settings.
    pub fn config(&self) -> &ReconcilerConfig {
        &self.config
    }

    /// The strategies as `drover handlers` prints them.
    pub fn role(&self) -> crate::worker::RoleInfo {
        crate::worker::RoleInfo {
            role: "sync reconciler".into(),
            name: self.name.clone(),
            strategies: vec![
                (
                    "conflict".into(),
                    format!(
                        "{}: {}",
                        self.strategy.conflict, self.strategy.conflict_reason
                    ),
                ),
                ("idempotency".into(), RECONCILER_IDEMPOTENCY.to_owned()),
                ("retry".into(), RECONCILER_RETRY.to_owned()),
                ("checkpoint".into(), self.strategy.checkpoint.to_owned()),
                ("recovery".into(), RECONCILER_RECOVERY.to_owned()),
            ],
        }
    }

    /// Pulls and applies one batch for `tenant`.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the source fails; [`Error::InvalidInput`]
    /// when it hands back a bad change (an empty key, changes without a
    /// cursor); storage errors. In every case nothing changed.
    pub async fn run_tenant_once(&self, tenant: Uuid) -> Result<BatchReport> {
        let store = self.queue.store();
        let cp = store.reconcile_checkpoint_get(tenant, &self.name).await?;
        let batch = self
            .source
            .pull(
                tenant,
                cp.as_ref().map(|c| c.cursor.as_str()),
                self.config.batch_size,
            )
            .await
            .map_err(|e| Error::Unavailable(Opaque::msg(e.to_string())))?;
        let mut report = BatchReport {
            tenant_id: tenant,
            pulled: batch.changes.len() as u64,
            ..BatchReport::default()
        };
        if batch.changes.is_empty() {
            return Ok(report);
        }
        for c in &batch.changes {
            validate_key(&c.key)?;
        }
        let Some(cursor) = batch.cursor.filter(|c| !c.is_empty()) else {
            return Err(Error::invalid(
                "cursor",
                "a source batch with changes must name the cursor after them",
            ));
        };
        let apply = ApplyBatch {
            tenant_id: tenant,
            reconciler: self.name.clone(),
            expected_version: cp.as_ref().map_or(0, |c| c.version),
            cursor,
            changes: batch.changes,
            conflict: self.strategy.conflict,
        };
        match store.reconcile_apply(&apply).await {
            Ok(a) => {
                metrics::counter!("drover_reconcile_changes_total", "reconciler" => self.name.clone())
                    .increment(report.pulled);
                if a.parked > 0 {
                    metrics::counter!("drover_reconcile_parked_total", "reconciler" => self.name.clone())
                        .increment(a.parked);
                }
                report.applied = a;
            }
            Err(e) if e.is_conflict() => {
                tracing::debug!(reconciler = %self.name, %tenant, "another runner moved the checkpoint first");
                report.raced = true;
            }
            Err(e) => return Err(e),
        }
        Ok(report)
    }

    /// One batch for every tenant served, except those waiting out their
    /// backoff. A tenant whose run fails (an error, or a panic in the
    /// source, contained here) does not stop the others: it is reported in
    /// [`ReconcileReport::failed`], counted in
    /// `drover_reconcile_failed_total`, and waits a backoff that doubles
    /// per failure in a row before its next run.
    ///
    /// # Cancel safety
    /// Cancelling it leaves every checkpoint committed or untouched.
    pub async fn run_once(&self) -> ReconcileReport {
        let mut out = ReconcileReport::default();
        for &tenant in &self.config.tenants {
            if self.book().waiting(tenant, tokio::time::Instant::now()) {
                out.waiting.push(tenant);
                continue;
            }
            let run = std::panic::AssertUnwindSafe(self.run_tenant_once(tenant)).catch_unwind();
            let (error, panicked) = match run.await {
                Ok(Ok(b)) => {
                    self.book().succeeded(tenant);
                    out.more |= b.pulled >= u64::from(self.config.batch_size) || b.raced;
                    out.batches.push(b);
                    continue;
                }
                Ok(Err(e)) => (e.to_string(), false),
                Err(p) => (format!("the source panicked: {}", panic_message(&*p)), true),
            };
            let f = self.book().failed(
                tenant,
                error,
                panicked,
                (self.config.backoff_base, self.config.backoff_cap),
                tokio::time::Instant::now(),
            );
            tracing::warn!(reconciler = %self.name, %tenant, error = %f.error, panicked,
                in_a_row = f.in_a_row, retry_in = ?f.retry_in,
                "reconciler run failed for a tenant; the others go on");
            let cause = if panicked { "panic" } else { "error" };
            metrics::counter!("drover_reconcile_failed_total",
                "reconciler" => self.name.clone(), "cause" => cause)
            .increment(1);
            out.failed.push(f);
        }
        self.publish_failing();
        out
    }

    /// Publishes the failing tenants: the gauge, and the worker's health.
    fn publish_failing(&self) {
        let failing = self.failing();
        metrics::gauge!("drover_reconcile_failing_tenants", "reconciler" => self.name.clone())
            .set(failing.len() as f64);
        let Some(health) = self.health.get() else {
            return;
        };
        let detail = failing.last().map(|f| {
            format!(
                "{} of {} tenants failing (tenant {}, {} in a row: {})",
                failing.len(),
                self.config.tenants.len(),
                f.tenant_id,
                f.in_a_row,
                f.error
            )
        });
        health.set_failing(&format!("sync reconciler {}", self.name), detail);
    }

    /// Purges up to [`RECONCILE_PURGE_LIMIT`] of this reconciler's
    /// tombstones older than the retention, across tenants.
    ///
    /// # Errors
    /// Storage errors; nothing is purged then.
    pub async fn purge_once(&self) -> Result<u64> {
        let store = self.queue.store();
        let now = store.db_now().await?;
        let keep = chrono::Duration::from_std(self.config.retention)
            .map_err(|_| Error::Config("the reconciler retention is too long".into()))?;
        store
            .reconcile_purge_deleted(&self.name, now - keep, RECONCILE_PURGE_LIMIT)
            .await
    }

    /// Runs until `stop`: batch after batch while the source has more, then
    /// purges tombstones past the retention and waits the interval plus a
    /// random jitter. A failing tenant is retried after its own backoff.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            let more = self.run_once().await.more;
            if !more {
                match self.purge_once().await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::debug!(reconciler = %self.name, purged = n, "tombstones purged")
                    }
                    Err(e) => {
                        tracing::warn!(reconciler = %self.name, error = %e, "tombstone purge failed; retrying next pass")
                    }
                }
            }
            let wait = if more {
                Duration::ZERO
            } else {
                self.config.interval + self.config.jitter.mul_f64(rand::random::<f64>())
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
