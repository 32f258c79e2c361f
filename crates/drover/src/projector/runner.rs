//! The projector runner: one per projector per worker, taking the lease of
//! each (projector, tenant) it finds free, applying batches from the
//! checkpoint, and reporting the lag.
//!
//! Shape of every background service: [`ProjectorConfig`] with documented
//! defaults, [`ProjectorRunner::new`] validating it, [`ProjectorRunner::run_once`]
//! for tests to call directly, [`ProjectorRunner::run`] on a jittered timer.
//!
//! Invariants: a pass never applies an event of a tenant whose lease it
//! does not hold (every batch is fenced in the store); a pass that loses a
//! lease stops that tenant at once; a failing batch is retried on the next
//! pass and never skipped.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{LeaseParams, Projector, ProjectorLease};
use crate::error::{Error, Result};
use crate::store::Store;

/// Events read and applied per transaction.
pub const PROJECTOR_BATCH_DEFAULT: u32 = 500;
/// How long a runner's lease on (projector, tenant) lasts unless a batch
/// renews it; a runner that dies is replaced after at most this.
pub const PROJECTOR_LEASE_DEFAULT: Duration = Duration::from_secs(30);
/// The pause between passes.
pub const PROJECTOR_INTERVAL_DEFAULT: Duration = Duration::from_millis(500);
/// Batches per tenant per pass, so one busy tenant does not starve the
/// others of this runner.
pub const PROJECTOR_MAX_BATCHES_DEFAULT: u32 = 20;
/// Tenants a pass looks at, at most.
const TENANTS_PER_PASS: u32 = 10_000;

/// How a [`ProjectorRunner`] runs. Every field has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectorConfig {
    /// Who holds the leases (the worker id). Default: `projector-<pid>`.
    pub holder: String,
    /// Default [`PROJECTOR_BATCH_DEFAULT`].
    pub batch: u32,
    /// Default [`PROJECTOR_LEASE_DEFAULT`].
    pub lease: Duration,
    /// Default [`PROJECTOR_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Default [`PROJECTOR_MAX_BATCHES_DEFAULT`].
    pub max_batches: u32,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        ProjectorConfig {
            holder: format!("projector-{}", std::process::id()),
            batch: PROJECTOR_BATCH_DEFAULT,
            lease: PROJECTOR_LEASE_DEFAULT,
            interval: PROJECTOR_INTERVAL_DEFAULT,
            max_batches: PROJECTOR_MAX_BATCHES_DEFAULT,
        }
    }
}

impl ProjectorConfig {
    /// Checks the relations between the fields.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field and the relation broken.
    pub fn validate(&self) -> Result<()> {
        if self.holder.trim().is_empty() {
            return Err(Error::Config("projector holder must not be empty".into()));
        }
        if self.batch == 0 || self.max_batches == 0 {
            return Err(Error::Config(
                "projector batch and max_batches must be at least 1".into(),
            ));
        }
        if self.lease < Duration::from_secs(1) {
            return Err(Error::Config(
                "projector lease must be at least 1 s (a batch must fit in it)".into(),
            ));
        }
        if self.interval.is_zero() || self.interval * 2 > self.lease {
            return Err(Error::Config(
                "projector interval must be above 0 and at most half the lease".into(),
            ));
        }
        Ok(())
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProjectorReport {
    /// Tenants with events.
    pub tenants: usize,
    /// Tenants whose lease this pass took.
    pub leased: usize,
    /// Tenants another runner held.
    pub busy: usize,
    /// Events the checkpoints moved past (applied, or of other topics).
    pub applied: u64,
    /// Rebuilds run.
    pub rebuilt: usize,
    /// Tenants whose batch failed (retried next pass) or whose lease was
    /// lost mid-pass.
    pub failed: usize,
    /// Events behind the heads, summed over tenants, after the pass.
    pub behind_events: i64,
    /// Age of the oldest event not applied yet, over tenants, after the pass.
    pub behind_seconds: f64,
}

/// One tenant's checkpoint against its log's head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantStatus {
    /// The tenant.
    pub tenant: Uuid,
    /// The last position applied.
    pub position: i64,
    /// The log's newest position.
    pub head: i64,
    /// `head - position`.
    pub behind_events: i64,
    /// Age of the oldest event not applied yet (0 when caught up).
    pub behind_seconds: f64,
    /// The runner holding the lease, while one does.
    pub holder: Option<String>,
    /// When its lease passes.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// A rebuild is asked for and has not run yet.
    pub rebuild_requested: bool,
    /// Rebuilds run so far.
    pub rebuilds: i32,
}

/// The checkpoint of `projector` against the head of every tenant's log
/// (tenants it has not run for yet show position 0), for `drover projector
/// status` and the lag gauges.
///
/// # Errors
/// Storage errors.
pub async fn status(store: &dyn Store, projector: &str) -> Result<Vec<TenantStatus>> {
    let rows = store.projector_checkpoints(Some(projector)).await?;
    let mut tenants = store.event_tenants(TENANTS_PER_PASS).await?;
    for r in &rows {
        if !tenants.contains(&r.tenant) {
            tenants.push(r.tenant);
        }
    }
    tenants.sort();
    let now = store.db_now().await?;
    let mut out = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        let row = rows.iter().find(|r| r.tenant == tenant);
        let position = row.map_or(0, |r| r.position);
        let head = store.event_head(tenant).await?.position;
        let behind_seconds = if head > position {
            store
                .event_read(tenant, position, &[], 1)
                .await?
                .first()
                .map_or(0.0, |e| {
                    (now - e.created_at).num_milliseconds().max(0) as f64 / 1000.0
                })
        } else {
            0.0
        };
        out.push(TenantStatus {
            tenant,
            position,
            head,
            behind_events: (head - position).max(0),
            behind_seconds,
            holder: row.and_then(|r| r.holder.clone()),
            lease_expires_at: row.and_then(|r| r.lease_expires_at),
            rebuild_requested: row.is_some_and(|r| r.rebuild_requested),
            rebuilds: row.map_or(0, |r| r.rebuilds),
        });
    }
    Ok(out)
}

/// Runs one projector over every tenant's log. See the module docs.
pub struct ProjectorRunner {
    store: Arc<dyn Store>,
    projector: Arc<dyn Projector>,
    config: ProjectorConfig,
}

impl std::fmt::Debug for ProjectorRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectorRunner")
            .field("projector", &self.projector.name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How one tenant's part of a pass ended.
enum TenantOutcome {
    Busy,
    Done { applied: u64, rebuilt: usize },
    Failed { applied: u64, rebuilt: usize },
}

impl ProjectorRunner {
    /// A runner of `projector` over `store`.
    ///
    /// # Errors
    /// As [`super::validate`] and [`ProjectorConfig::validate`].
    pub fn new(
        store: Arc<dyn Store>,
        projector: Arc<dyn Projector>,
        config: ProjectorConfig,
    ) -> Result<Self> {
        super::validate(projector.as_ref())?;
        config.validate()?;
        Ok(ProjectorRunner {
            store,
            projector,
            config,
        })
    }

    /// The projector it runs.
    pub fn projector(&self) -> &Arc<dyn Projector> {
        &self.projector
    }

    /// One pass: for every tenant with events whose lease is free, take it,
    /// rebuild if asked, apply up to `max_batches` batches from the
    /// checkpoint, give the lease back; then set the lag gauges.
    ///
    /// # Errors
    /// Storage errors of the discovery or the lag; a tenant's failed batch
    /// is counted in the report, not returned.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped pass leaves at most a lease that passes by
    /// itself, and every batch commits whole or not at all.
    pub async fn run_once(&self) -> Result<ProjectorReport> {
        let tenants = self.store.event_tenants(TENANTS_PER_PASS).await?;
        let mut report = ProjectorReport {
            tenants: tenants.len(),
            ..ProjectorReport::default()
        };
        for tenant in tenants {
            match self.run_tenant(tenant).await {
                TenantOutcome::Busy => report.busy += 1,
                TenantOutcome::Done { applied, rebuilt } => {
                    report.leased += 1;
                    report.applied += applied;
                    report.rebuilt += rebuilt;
                }
                TenantOutcome::Failed { applied, rebuilt } => {
                    report.leased += 1;
                    report.failed += 1;
                    report.applied += applied;
                    report.rebuilt += rebuilt;
                }
            }
        }
        let lag = status(self.store.as_ref(), self.projector.name()).await?;
        report.behind_events = lag.iter().map(|t| t.behind_events).sum();
        report.behind_seconds = lag.iter().map(|t| t.behind_seconds).fold(0.0, f64::max);
        let name = self.projector.name().to_owned();
        metrics::gauge!("drover_projector_lag_events", "projector" => name.clone())
            .set(report.behind_events as f64);
        metrics::gauge!("drover_projector_lag_seconds", "projector" => name.clone())
            .set(report.behind_seconds);
        metrics::counter!("drover_projector_applied_total", "projector" => name)
            .increment(report.applied);
        Ok(report)
    }

    async fn run_tenant(&self, tenant: Uuid) -> TenantOutcome {
        let p = self.projector.as_ref();
        let params = LeaseParams {
            projector: p.name().to_owned(),
            tenant,
            holder: self.config.holder.clone(),
            lease: self.config.lease,
        };
        let mut lease = match self.store.projector_lease_take(&params).await {
            Ok(Some(l)) => l,
            Ok(None) => return TenantOutcome::Busy,
            Err(e) => {
                tracing::warn!(projector = p.name(), %tenant, error = %e, "projector lease not taken");
                return TenantOutcome::Failed {
                    applied: 0,
                    rebuilt: 0,
                };
            }
        };
        let (mut applied, mut rebuilt) = (0u64, 0usize);
        let failed = match self.drain(&mut lease, &mut applied, &mut rebuilt).await {
            Ok(()) => false,
            Err(e) => {
                if e.is_conflict() {
                    tracing::info!(projector = p.name(), %tenant, "projector lease lost; stopping this tenant");
                } else {
                    tracing::warn!(projector = p.name(), %tenant, position = lease.position, error = %e,
                        "projector batch failed; retried next pass");
                    metrics::counter!("drover_projector_failed_total", "projector" => p.name().to_owned())
                        .increment(1);
                }
                true
            }
        };
        if let Err(e) = self.store.projector_lease_release(&lease).await {
            // It passes by itself; the next runner waits at most one lease.
            tracing::warn!(projector = p.name(), %tenant, error = %e, "projector lease not released");
        }
        if failed {
            TenantOutcome::Failed { applied, rebuilt }
        } else {
            TenantOutcome::Done { applied, rebuilt }
        }
    }

    async fn drain(
        &self,
        lease: &mut ProjectorLease,
        applied: &mut u64,
        rebuilt: &mut usize,
    ) -> Result<()> {
        let p = self.projector.as_ref();
        let mut batches = 0;
        while batches < self.config.max_batches {
            if lease.rebuild_requested {
                *lease = self
                    .store
                    .projector_rebuild(lease, self.config.lease, p)
                    .await?;
                *rebuilt += 1;
                tracing::info!(projector = p.name(), tenant = %lease.tenant, "projection reset; replaying the log");
                continue;
            }
            let events = self
                .store
                .event_read(lease.tenant, lease.position, &[], self.config.batch)
                .await?;
            let Some(last) = events.last() else {
                return Ok(());
            };
            let through = last.position;
            *lease = self
                .store
                .projector_apply(lease, self.config.lease, &events, p)
                .await?;
            debug_assert_eq!(lease.position, through);
            *applied += events.len() as u64;
            batches += 1;
            if events.len() < self.config.batch as usize {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Runs passes until `stop` fires, each after the interval plus a
    /// random jitter of up to half of it; a pass that failed is logged and
    /// the next one runs on time.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            if let Err(e) = self.run_once().await {
                tracing::warn!(projector = self.projector.name(), error = %e, "projector pass skipped");
            }
            let jitter = self.config.interval.mul_f64(rand::random::<f64>() / 2.0);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.config.interval + jitter) => {}
            }
        }
    }
}
