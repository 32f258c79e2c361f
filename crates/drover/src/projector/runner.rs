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
//! lease stops that tenant at once; a failing batch is retried after a
//! per-tenant backoff and never skipped. A pass pages through **every**
//! tenant behind its head (a cursor on the tenant id, `tenant_page` at a
//! time), so no tenant is left out however many there are, and tenants
//! already caught up cost nothing but their row in the page's read. A panic
//! in the projector's `apply` or `reset` is contained as a failed batch
//! (rolled back, checkpoint unmoved, counted in
//! `drover_projector_panics_total`); the task keeps running for the life of
//! the worker and the lag gauges keep moving. The lag is one aggregate
//! read per pass.

use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{LeaseParams, Projector, ProjectorLease};
use crate::error::{Error, Result};
use crate::store::{Backend, Store};

/// Events read and applied per transaction (PostgreSQL, memory).
pub const PROJECTOR_BATCH_DEFAULT: u32 = 500;
/// Events per transaction on SQLite: its one writer is held from the
/// checkpoint's move to the commit, across every `apply` of the batch, so
/// the default batch there is small to keep every other write waiting
/// briefly ([`ProjectorConfig::for_backend`]).
pub const PROJECTOR_BATCH_SQLITE_DEFAULT: u32 = 50;
/// The largest batch [`ProjectorConfig::validate`] accepts.
pub const PROJECTOR_BATCH_MAX: u32 = 10_000;
/// How long a runner's lease on (projector, tenant) lasts unless a batch
/// renews it; a runner that dies is replaced after at most this.
pub const PROJECTOR_LEASE_DEFAULT: Duration = Duration::from_secs(30);
/// The pause between passes.
pub const PROJECTOR_INTERVAL_DEFAULT: Duration = Duration::from_millis(500);
/// Batches per tenant per pass, so one busy tenant does not starve the
/// others of this runner.
pub const PROJECTOR_MAX_BATCHES_DEFAULT: u32 = 20;
/// The most batches per tenant per pass [`ProjectorConfig::validate`]
/// accepts.
pub const PROJECTOR_MAX_BATCHES_MAX: u32 = 1_000;
/// Tenants read per discovery page: a pass pages through every tenant
/// behind its head, this many at a time, by tenant id.
pub const PROJECTOR_TENANT_PAGE_DEFAULT: u32 = 1_000;
/// The largest discovery page [`ProjectorConfig::validate`] accepts.
pub const PROJECTOR_TENANT_PAGE_MAX: u32 = 10_000;
/// The first pause before a tenant whose batch failed is tried again;
/// doubled per failure in a row.
pub const PROJECTOR_BACKOFF_BASE_DEFAULT: Duration = Duration::from_secs(1);
/// The longest pause before a failing tenant is tried again.
pub const PROJECTOR_BACKOFF_CAP_DEFAULT: Duration = Duration::from_secs(60);
/// How often a runner records that its projector is alive (what keeps its
/// checkpoints from the retention of removed projectors' checkpoints).
const SEEN_EVERY: Duration = Duration::from_secs(10);

/// How a [`ProjectorRunner`] runs. Every field has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectorConfig {
    /// Who holds the leases (the worker id). Default: `projector-<pid>`.
    pub holder: String,
    /// Events per transaction, at most [`PROJECTOR_BATCH_MAX`]. Default
    /// [`PROJECTOR_BATCH_DEFAULT`] ([`PROJECTOR_BATCH_SQLITE_DEFAULT`] on
    /// SQLite through [`ProjectorConfig::for_backend`]).
    pub batch: u32,
    /// Default [`PROJECTOR_LEASE_DEFAULT`].
    pub lease: Duration,
    /// Default [`PROJECTOR_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// At most [`PROJECTOR_MAX_BATCHES_MAX`]. Default
    /// [`PROJECTOR_MAX_BATCHES_DEFAULT`].
    pub max_batches: u32,
    /// Tenants per discovery page, at most [`PROJECTOR_TENANT_PAGE_MAX`].
    /// Default [`PROJECTOR_TENANT_PAGE_DEFAULT`].
    pub tenant_page: u32,
    /// First backoff of a failing tenant (zero: retried on the next pass).
    /// Default [`PROJECTOR_BACKOFF_BASE_DEFAULT`].
    pub backoff_base: Duration,
    /// Backoff cap. Default [`PROJECTOR_BACKOFF_CAP_DEFAULT`].
    pub backoff_cap: Duration,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        ProjectorConfig {
            holder: format!("projector-{}", std::process::id()),
            batch: PROJECTOR_BATCH_DEFAULT,
            lease: PROJECTOR_LEASE_DEFAULT,
            interval: PROJECTOR_INTERVAL_DEFAULT,
            max_batches: PROJECTOR_MAX_BATCHES_DEFAULT,
            tenant_page: PROJECTOR_TENANT_PAGE_DEFAULT,
            backoff_base: PROJECTOR_BACKOFF_BASE_DEFAULT,
            backoff_cap: PROJECTOR_BACKOFF_CAP_DEFAULT,
        }
    }
}

impl ProjectorConfig {
    /// The defaults for a store of `backend`: on SQLite a batch of
    /// [`PROJECTOR_BATCH_SQLITE_DEFAULT`], so the one writer is not held
    /// across a long `apply` batch.
    pub fn for_backend(backend: Backend) -> Self {
        let batch = match backend {
            Backend::Sqlite => PROJECTOR_BATCH_SQLITE_DEFAULT,
            Backend::Postgres | Backend::Memory => PROJECTOR_BATCH_DEFAULT,
        };
        ProjectorConfig {
            batch,
            ..ProjectorConfig::default()
        }
    }

    /// Checks each field's range and the relations between them.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field and the bound or relation broken.
    pub fn validate(&self) -> Result<()> {
        if self.holder.trim().is_empty() {
            return Err(Error::Config("projector holder must not be empty".into()));
        }
        for (name, v, max) in [
            ("batch", self.batch, PROJECTOR_BATCH_MAX),
            ("max_batches", self.max_batches, PROJECTOR_MAX_BATCHES_MAX),
            ("tenant_page", self.tenant_page, PROJECTOR_TENANT_PAGE_MAX),
        ] {
            if v == 0 || v > max {
                return Err(Error::Config(format!(
                    "projector {name} must be between 1 and {max} (got {v})"
                )));
            }
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
        if self.backoff_base > self.backoff_cap {
            return Err(Error::Config(
                "projector backoff_base must not exceed backoff_cap".into(),
            ));
        }
        Ok(())
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProjectorReport {
    /// Tenants behind their head (or with a rebuild asked) this pass found,
    /// over every page.
    pub tenants: usize,
    /// Tenants whose lease this pass took.
    pub leased: usize,
    /// Tenants another runner held.
    pub busy: usize,
    /// Tenants skipped because an earlier batch of theirs failed and their
    /// backoff has not passed.
    pub backing_off: usize,
    /// Events the checkpoints moved past (applied, or of other topics).
    pub applied: u64,
    /// Rebuilds run.
    pub rebuilt: usize,
    /// Tenants whose batch failed (retried after a backoff) or whose lease
    /// was lost mid-pass.
    pub failed: usize,
    /// Of those, tenants whose `apply` or `reset` panicked (contained as a
    /// failed batch).
    pub panicked: usize,
    /// Events behind the heads, summed over tenants, after the pass.
    pub behind_events: i64,
    /// Age of the oldest event not applied yet, over tenants, after the pass.
    pub behind_seconds: f64,
}

/// A failing tenant's backoff: failures in a row and when it may run again.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    until: Instant,
}

/// Where a runner reports the tenants it is backing off (the worker's
/// health, read by `/healthz`).
type FailingSink = Arc<dyn Fn(&str, usize) + Send + Sync>;

/// Runs one projector over every tenant's log. See the module docs.
pub struct ProjectorRunner {
    store: Arc<dyn Store>,
    projector: Arc<dyn Projector>,
    config: ProjectorConfig,
    /// Failing tenants; an entry goes when its tenant's batch lands or the
    /// tenant is no longer behind, so it holds at most the failing tenants.
    backoff: Mutex<HashMap<Uuid, Backoff>>,
    /// When the projector was last recorded alive.
    seen: Mutex<Option<Instant>>,
    failing_sink: Option<FailingSink>,
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
    Done {
        applied: u64,
        rebuilt: usize,
    },
    /// Lost its lease to another runner: not the tenant's fault, no backoff.
    Lost {
        applied: u64,
        rebuilt: usize,
    },
    Failed {
        applied: u64,
        rebuilt: usize,
        panicked: bool,
    },
}

/// What a panic carried, as text for the log.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
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
            backoff: Mutex::new(HashMap::new()),
            seen: Mutex::new(None),
            failing_sink: None,
        })
    }

    /// Reports the count of failing tenants after every pass to `sink`.
    pub(crate) fn with_failing_sink(mut self, sink: FailingSink) -> Self {
        self.failing_sink = Some(sink);
        self
    }

    /// The projector it runs.
    pub fn projector(&self) -> &Arc<dyn Projector> {
        &self.projector
    }

    /// Tenants whose last batch failed and that are waiting out a backoff.
    pub fn failing_tenants(&self) -> usize {
        self.backoff.lock().map_or(0, |b| b.len())
    }

    /// One pass: record the projector alive; page through every tenant
    /// behind its head (or with a rebuild asked), by tenant id, and for each
    /// whose lease is free and whose backoff has passed: take it, rebuild if
    /// asked, apply up to `max_batches` batches from the checkpoint, give
    /// the lease back; then set the lag gauges from one aggregate read.
    ///
    /// # Errors
    /// Storage errors of the discovery or the lag; a tenant's failed (or
    /// panicked) batch is counted in the report, not returned.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped pass leaves at most a lease that passes by
    /// itself, and every batch commits whole or not at all.
    pub async fn run_once(&self) -> Result<ProjectorReport> {
        let name = self.projector.name().to_owned();
        self.record_seen().await;
        let mut report = ProjectorReport::default();
        let mut pending = BTreeSet::new();
        let mut after = None;
        loop {
            let page = self
                .store
                .projector_pending(&name, after, self.config.tenant_page)
                .await?;
            let full = page.len() >= self.config.tenant_page as usize;
            after = page.last().copied();
            for tenant in page {
                report.tenants += 1;
                pending.insert(tenant);
                if self.backing_off(tenant) {
                    report.backing_off += 1;
                    continue;
                }
                self.count(&mut report, tenant, self.run_tenant(tenant).await);
            }
            if !full {
                break;
            }
        }
        let failing = {
            let mut b = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
            // A tenant no longer behind (another runner moved it) needs no
            // backoff: the map holds only tenants still failing.
            b.retain(|t, _| pending.contains(t));
            b.len()
        };
        let lag = self.store.projector_lag(&name).await?;
        report.behind_events = lag.behind_events;
        report.behind_seconds = lag.behind_seconds;
        metrics::gauge!("drover_projector_lag_events", "projector" => name.clone())
            .set(report.behind_events as f64);
        metrics::gauge!("drover_projector_lag_seconds", "projector" => name.clone())
            .set(report.behind_seconds);
        metrics::gauge!("drover_projector_failing_tenants", "projector" => name.clone())
            .set(failing as f64);
        metrics::counter!("drover_projector_applied_total", "projector" => name.clone())
            .increment(report.applied);
        if let Some(sink) = &self.failing_sink {
            sink(&name, failing);
        }
        Ok(report)
    }

    /// Adds one tenant's outcome to the report and moves its backoff.
    fn count(&self, report: &mut ProjectorReport, tenant: Uuid, outcome: TenantOutcome) {
        let (applied, rebuilt) = match outcome {
            TenantOutcome::Busy => {
                report.busy += 1;
                return;
            }
            TenantOutcome::Done { applied, rebuilt } => {
                self.backoff
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&tenant);
                (applied, rebuilt)
            }
            TenantOutcome::Lost { applied, rebuilt } => {
                report.failed += 1;
                (applied, rebuilt)
            }
            TenantOutcome::Failed {
                applied,
                rebuilt,
                panicked,
            } => {
                report.failed += 1;
                report.panicked += usize::from(panicked);
                self.back_off(tenant);
                (applied, rebuilt)
            }
        };
        report.leased += 1;
        report.applied += applied;
        report.rebuilt += rebuilt;
    }

    /// True while `tenant`'s backoff has not passed.
    fn backing_off(&self, tenant: Uuid) -> bool {
        self.backoff
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tenant)
            .is_some_and(|b| b.until > Instant::now())
    }

    /// Counts a failure of `tenant` and doubles its pause (from
    /// `backoff_base`, at most `backoff_cap`).
    fn back_off(&self, tenant: Uuid) {
        let mut b = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        let e = b.entry(tenant).or_insert(Backoff {
            failures: 0,
            until: Instant::now(),
        });
        e.failures = e.failures.saturating_add(1);
        let pause = self
            .config
            .backoff_base
            .saturating_mul(1u32 << (e.failures - 1).min(16))
            .min(self.config.backoff_cap);
        e.until = Instant::now() + pause;
    }

    /// Records the projector alive at most every [`SEEN_EVERY`]; a failure
    /// is logged (the next pass tries again).
    async fn record_seen(&self) {
        let due = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|at| at.elapsed() >= SEEN_EVERY);
        if !due {
            return;
        }
        match self.store.projector_seen(self.projector.name()).await {
            Ok(()) => {
                *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            }
            Err(e) => {
                tracing::warn!(projector = self.projector.name(), error = %e, "projector not recorded alive");
            }
        }
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
                    panicked: false,
                };
            }
        };
        let (mut applied, mut rebuilt) = (0u64, 0usize);
        // A panic in the projector's `apply` or `reset` is contained here as
        // a failed batch: its transaction was dropped unfinished (rolled
        // back, checkpoint unmoved) and the runner goes on with the others.
        let drained = AssertUnwindSafe(self.drain(&mut lease, &mut applied, &mut rebuilt))
            .catch_unwind()
            .await;
        let outcome = match drained {
            Ok(Ok(())) => TenantOutcome::Done { applied, rebuilt },
            Ok(Err(e)) if e.is_conflict() => {
                tracing::info!(projector = p.name(), %tenant, "projector lease lost; stopping this tenant");
                TenantOutcome::Lost { applied, rebuilt }
            }
            Ok(Err(e)) => {
                tracing::warn!(projector = p.name(), %tenant, position = lease.position, error = %e,
                    "projector batch failed; retried after a backoff");
                metrics::counter!("drover_projector_failed_total", "projector" => p.name().to_owned())
                    .increment(1);
                TenantOutcome::Failed {
                    applied,
                    rebuilt,
                    panicked: false,
                }
            }
            Err(panic) => {
                tracing::error!(projector = p.name(), %tenant, position = lease.position,
                    panic = %panic_text(panic.as_ref()),
                    "projector panicked; the batch is rolled back and retried after a backoff");
                metrics::counter!("drover_projector_failed_total", "projector" => p.name().to_owned())
                    .increment(1);
                metrics::counter!("drover_projector_panics_total", "projector" => p.name().to_owned())
                    .increment(1);
                TenantOutcome::Failed {
                    applied,
                    rebuilt,
                    panicked: true,
                }
            }
        };
        if let Err(e) = self.store.projector_lease_release(&lease).await {
            // It passes by itself; the next runner waits at most one lease.
            tracing::warn!(projector = p.name(), %tenant, error = %e, "projector lease not released");
        }
        outcome
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
    /// random jitter of up to half of it; a pass that failed (or panicked
    /// outside a tenant's batch) is logged and the next one runs on time:
    /// the task lives as long as the worker.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            match AssertUnwindSafe(self.run_once()).catch_unwind().await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(projector = self.projector.name(), error = %e, "projector pass skipped");
                }
                Err(panic) => {
                    tracing::error!(projector = self.projector.name(), panic = %panic_text(panic.as_ref()),
                        "projector pass panicked; the next pass runs on time");
                    metrics::counter!("drover_projector_panics_total", "projector" => self.projector.name().to_owned())
                        .increment(1);
                }
            }
            let jitter = self.config.interval.mul_f64(rand::random::<f64>() / 2.0);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.config.interval + jitter) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use async_trait::async_trait;

    use super::*;
    use crate::events::{Event, EventStore, NewEvent};
    use crate::projector::{ProjectionTx, ProjectorStrategy};
    use crate::store::memory::MemoryStore;

    /// Counts what it applied.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicU64);

    #[async_trait]
    impl Projector for Count {
        fn name(&self) -> &str {
            "count"
        }
        fn topics(&self) -> Vec<String> {
            vec![]
        }
        fn strategy(&self) -> ProjectorStrategy {
            ProjectorStrategy {
                idempotency: "a test double: counts every call",
                retry: ProjectorStrategy::RETRY_DEFAULT,
                checkpoint: "the memory store's checkpoint",
                recovery: ProjectorStrategy::RECOVERY_DEFAULT,
                rebuild: "nothing to reset",
                lag: "read by the test",
            }
        }
        async fn apply(&self, _e: &Event, _tx: &mut ProjectionTx<'_>) -> Result<()> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        async fn reset(&self, _t: Uuid, _tx: &mut ProjectionTx<'_>) -> Result<()> {
            Ok(())
        }
    }

    /// The defect: a pass read a fixed prefix of 10,000 tenants, so the
    /// 10,001st was never projected. With the default page, one pass now
    /// reaches every tenant.
    #[tokio::test]
    async fn one_pass_projects_more_than_ten_thousand_tenants() {
        let store = Arc::new(MemoryStore::new());
        let n = 10_001u128;
        let events: Vec<NewEvent> = (1..=n)
            .map(|t| NewEvent::new("t", serde_json::json!({})).in_tenant(Uuid::from_u128(t)))
            .collect();
        store.event_append_many(&events).await.unwrap();
        let p = Arc::new(Count::default());
        let runner = ProjectorRunner::new(
            store,
            Arc::clone(&p) as Arc<dyn Projector>,
            ProjectorConfig::default(),
        )
        .unwrap();
        let r = runner.run_once().await.unwrap();
        assert_eq!(r.tenants as u128, n);
        assert_eq!(p.0.load(std::sync::atomic::Ordering::Relaxed) as u128, n);
        assert_eq!(r.behind_events, 0, "every tenant caught up: {r:?}");
    }

    #[test]
    fn batch_sizes_and_pages_have_a_maximum() {
        let ok = ProjectorConfig::default();
        ok.validate().unwrap();
        for bad in [
            ProjectorConfig {
                batch: PROJECTOR_BATCH_MAX + 1,
                ..ok.clone()
            },
            ProjectorConfig {
                max_batches: PROJECTOR_MAX_BATCHES_MAX + 1,
                ..ok.clone()
            },
            ProjectorConfig {
                tenant_page: PROJECTOR_TENANT_PAGE_MAX + 1,
                ..ok.clone()
            },
            ProjectorConfig {
                tenant_page: 0,
                ..ok.clone()
            },
            ProjectorConfig {
                backoff_base: Duration::from_secs(120),
                ..ok.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::Config(_))),
                "{bad:?} accepted"
            );
        }
        assert_eq!(
            ProjectorConfig::for_backend(Backend::Sqlite).batch,
            PROJECTOR_BATCH_SQLITE_DEFAULT
        );
        assert_eq!(
            ProjectorConfig::for_backend(Backend::Postgres).batch,
            PROJECTOR_BATCH_DEFAULT
        );
    }

    #[test]
    fn the_role_declares_the_four_strategies_then_its_own() {
        let role = Count::default();
        let role = crate::projector::strategy_role(&role.strategy(), "count");
        let names: Vec<&str> = role.strategies.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "idempotency",
                "retry",
                "checkpoint",
                "recovery",
                "rebuild",
                "lag"
            ]
        );
        assert_eq!(role.role, "projector");
    }
}
