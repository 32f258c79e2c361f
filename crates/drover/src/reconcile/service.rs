//! The reconciler service: for each tenant it serves, it reads the
//! checkpoint, pulls the next batch of changes after it from the
//! [`Source`], and applies the batch with the checkpoint past it in one
//! transaction ([`ReconcileStore::reconcile_apply`]).
//!
//! Invariants: the cursor handed to the source is always a committed one,
//! so a run killed anywhere (while pulling, mid-batch, before the commit)
//! leaves the checkpoint where it was and the next run pulls the same
//! changes again; a run that lost the checkpoint's compare-and-set to
//! another runner changes nothing and is not an error.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::store::{ApplyBatch, ApplyReport};
use super::{Change, ReconcilerStrategy, validate_key, validate_name};
use crate::error::{Error, Opaque, Result};
use crate::queue::Queue;

/// The longest wait between two runs once the source is drained.
pub const RECONCILE_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);
/// Each wait is lengthened by a random delay up to this, so workers running
/// the same reconciler do not all pull at once.
pub const RECONCILE_JITTER_DEFAULT: Duration = Duration::from_millis(500);
/// How many changes one batch asks the source for.
pub const RECONCILE_BATCH_DEFAULT: u32 = 500;

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
    /// Changes per batch. Default [`RECONCILE_BATCH_DEFAULT`].
    pub batch_size: u32,
    /// The tenants it serves. Default: the nil tenant only.
    pub tenants: Vec<Uuid>,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            interval: RECONCILE_INTERVAL_DEFAULT,
            jitter: RECONCILE_JITTER_DEFAULT,
            batch_size: RECONCILE_BATCH_DEFAULT,
            tenants: vec![Uuid::nil()],
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
        if self.batch_size == 0 || self.batch_size > 10_000 {
            return Err(Error::Config(
                "the reconciler batch size must be 1 to 10000".into(),
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
    /// One entry per tenant served.
    pub batches: Vec<BatchReport>,
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
        })
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
                ("checkpoint".into(), self.strategy.checkpoint.to_owned()),
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

    /// One batch for every tenant served.
    ///
    /// # Errors
    /// The first tenant's error; the tenants before it have committed.
    pub async fn run_once(&self) -> Result<ReconcileReport> {
        let mut out = ReconcileReport::default();
        for &tenant in &self.config.tenants {
            let b = self.run_tenant_once(tenant).await?;
            out.more |= b.pulled >= u64::from(self.config.batch_size) || b.raced;
            out.batches.push(b);
        }
        Ok(out)
    }

    /// Runs until `stop`: batch after batch while the source has more, then
    /// waits the interval plus a random jitter. A failed run is logged and
    /// retried after the wait.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            let more = match self.run_once().await {
                Ok(r) => r.more,
                Err(e) => {
                    tracing::warn!(reconciler = %self.name, error = %e, "reconciler run failed; retrying after the interval");
                    false
                }
            };
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

impl crate::worker::WorkerBuilder {
    /// Adds a sync reconciler: it runs beside the claim loop until the
    /// worker shuts down, and its declared strategies are printed by
    /// `drover handlers`.
    pub fn reconciler(self, r: Reconciler) -> Self {
        let role = r.role();
        let r = Arc::new(r);
        self.role(role).service(Box::new(move |stop| {
            Box::pin(async move { r.run(stop).await })
        }))
    }
}
