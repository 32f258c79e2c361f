//! Liveness: the in-memory beat `/healthz` answers from, the best-effort
//! publication of the worker row, and the process's Prometheus recorder
//! (the HTTP listener that serves them is `listener`, compiled with the
//! `metrics-listener` feature).
//!
//! Invariants: claiming never waits on liveness. The beat is an atomic
//! store; the publication runs in its own task, bounded by the beat
//! interval, and a failed publish is logged and forgotten. `/healthz` never
//! touches the database (a slow database must not get a live worker
//! restarted); `/readyz` does (reachable, migrations current), bounded by
//! [`READY_CHECK_TIMEOUT`], and answers 503 without asking the database
//! once draining has begun. A background role (a sync reconciler) that
//! keeps failing (a projector's tenants in backoff, a sync reconciler) reports itself with [`Health::set_failing`]: `/healthz`
//! names it in its body but stays 200, because restarting the process
//! fixes neither a source that is down nor a bug that panics; the role's
//! failure counters and gauges are what alerts.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chrono::Utc;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::store::{Store, WorkerRow};

/// The longest `/readyz` waits for the database before answering 503.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The worker's health as `/healthz` reports it.
#[derive(Debug)]
pub struct Health {
    beat_ms: AtomicI64,
    loop_ms: AtomicI64,
    draining: AtomicBool,
    stale_after: Duration,
    /// Background roles failing now, by name ("sync reconciler crm"), with
    /// what they say about it.
    failing: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

impl Health {
    pub(crate) fn new(stale_after: Duration) -> Self {
        let now = now_ms();
        Health {
            beat_ms: AtomicI64::new(now),
            loop_ms: AtomicI64::new(now),
            draining: AtomicBool::new(false),
            stale_after,
            failing: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// Reports a background role (`who`, e.g. "sync reconciler crm") as
    /// failing with `detail`, or recovered with `None`. `/healthz` lists the
    /// failing ones.
    pub fn set_failing(&self, who: &str, detail: Option<String>) {
        let mut failing = self
            .failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match detail {
            Some(d) => {
                failing.insert(who.to_owned(), d);
            }
            None => {
                failing.remove(who);
            }
        }
    }

    /// The background roles failing now, with what each reported, by name.
    pub fn failing(&self) -> Vec<(String, String)> {
        self.failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Records a beat.
    pub(crate) fn beat(&self) {
        self.beat_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Records that the claim loop went round.
    pub(crate) fn loop_tick(&self) {
        self.loop_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Marks the worker as draining: `/healthz` turns 503.
    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// True while draining.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// True while beats are fresh, the loop is alive, and the worker is not
    /// draining.
    pub fn is_healthy(&self) -> bool {
        let stale = i64::try_from(self.stale_after.as_millis()).unwrap_or(i64::MAX);
        let now = now_ms();
        !self.is_draining()
            && now - self.beat_ms.load(Ordering::Relaxed) <= stale
            && now - self.loop_ms.load(Ordering::Relaxed) <= stale
    }
}

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's Prometheus handle. drover installs its recorder on first
/// use unless the host installed another recorder first, in which case
/// `/metrics` reports that instead of numbers.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0, 300.0,
                ])
                .ok()
                .map(|b| b.build_recorder())?;
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => Some(handle),
                Err(_) => {
                    tracing::warn!(
                        "a metrics recorder was already installed; /metrics stays empty"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Every counter drover exports, with its help text. Each is registered at
/// 0 when the listener starts, so a rule's `increase()` sees the first
/// event and the dashboard shows 0 rather than "no data".
pub const COUNTERS: &[(&str, &str)] = &[
    ("drover_enqueued_total", "items enqueued by this process"),
    ("drover_claimed_total", "items claimed by this process"),
    ("drover_completed_total", "items completed by this process"),
    (
        "drover_retried_total",
        "failed runs requeued with a retry delay",
    ),
    (
        "drover_dead_lettered_total",
        "items failed into the dead letter",
    ),
    (
        "drover_orphaned_total",
        "items failed because their tenant is gone",
    ),
    (
        "drover_lease_lost_total",
        "runs that lost their claim (renewal or completion refused)",
    ),
    (
        "drover_lease_expired_total",
        "lease-expired items the sweep handed back",
    ),
];

/// Registers and describes drover's metrics in the installed recorder.
#[cfg_attr(not(feature = "metrics-listener"), allow(dead_code))]
pub(super) fn register_metrics() {
    for (name, help) in COUNTERS {
        metrics::describe_counter!(*name, *help);
        metrics::counter!(*name).increment(0);
    }
    metrics::describe_histogram!(
        "drover_handler_duration_seconds",
        metrics::Unit::Seconds,
        "handler run time per kind"
    );
    metrics::describe_gauge!(
        "drover_queue_oldest_age_seconds",
        metrics::Unit::Seconds,
        "per lane, the age of the oldest available pending item (set by the sweeper)"
    );
    metrics::describe_gauge!(
        "drover_limit_in_use",
        "Slots a concurrency limit holds now (claimed items; a per-group limit: its fullest group), by scope, from the sweep"
    );
    metrics::describe_counter!(
        "drover_rate_limited_total",
        "Claims a rate limit held back, by scope: the claim left the scope's items out because its cell had no start to give, or refused a candidate on it (this process's claims)"
    );
    metrics::describe_gauge!(
        "drover_fair_started",
        "Starts fair share gave a tenant in a lane (since its pass row was made), by lane and tenant, from the sweep"
    );
    metrics::describe_gauge!(
        "drover_fair_waiting",
        "Available pending items of a tenant in a lane, by lane and tenant, from the sweep"
    );
    metrics::describe_gauge!(
        "drover_limit_waiting",
        "Available pending items a concurrency limit applies to, by scope, from the sweep"
    );
    metrics::describe_gauge!(
        "drover_work_failed",
        "items in the dead letter (set by the sweeper)"
    );
    metrics::describe_gauge!(
        "drover_sweep_last_run_timestamp_seconds",
        metrics::Unit::Seconds,
        "when the last completed sweep pass of any worker ended (Unix time, from the sweep lease row)"
    );
    metrics::describe_gauge!(
        "drover_records_parked",
        "orchestrations parked (waiting for a time or a signal) or stuck, read by every sweep"
    );
    metrics::describe_gauge!(
        "drover_projector_failing_tenants",
        "per projector, tenants whose last batch failed or panicked and that wait out a backoff (set every pass)"
    );
    metrics::describe_counter!(
        "drover_projector_panics_total",
        "per projector, panics in apply or reset contained as failed batches"
    );
    metrics::describe_gauge!(
        "drover_schedule_late_seconds",
        metrics::Unit::Seconds,
        "per schedule, how long its first due tick has waited without being enqueued (0 when on time)"
    );
    metrics::describe_counter!(
        "drover_vacuum_runs_total",
        "PostgreSQL: per table, the paced vacuum's vacuums that ran"
    );
    metrics::describe_histogram!(
        "drover_vacuum_seconds",
        metrics::Unit::Seconds,
        "PostgreSQL: per table, how long one paced vacuum took"
    );
    metrics::describe_gauge!(
        "drover_table_dead_tuples",
        "PostgreSQL: per table of drover's schema, dead tuples as pg_stat_user_tables last read (set by the paced vacuum each check)"
    );
    metrics::describe_counter!(
        "drover_reconcile_failed_total",
        "per sync reconciler and cause (error, panic), tenant runs that failed and were backed off"
    );
    metrics::describe_gauge!(
        "drover_reconcile_failing_tenants",
        "per sync reconciler, tenants whose last run failed (waiting out their backoff)"
    );
    metrics::describe_gauge!(
        "drover_db_oldest_xact_age_seconds",
        metrics::Unit::Seconds,
        "PostgreSQL: the age of the oldest open transaction in the database (read on every sweep tick)"
    );
}

/// Beats in memory every `interval` and publishes the row, best effort;
/// after each publish that lands, reads the workers table and sends this
/// worker's places among the live workers of its lanes to `peers` (the
/// wake-up spread, `spread`), so the claim loop never waits on that read.
///
/// At most one publish is in flight: a write still running when the next
/// beat is due (a database that is down or slow) is left to finish and
/// that beat's publish is skipped, so timed-out writes never stack up on
/// the pool. A failing publication is logged once when it starts failing
/// and once when it recovers, not on every beat.
pub(crate) async fn heartbeat(
    store: Arc<dyn Store>,
    health: Arc<Health>,
    row: WorkerRow,
    interval: Duration,
    peers: tokio::sync::watch::Sender<super::spread::Peers>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut row = row;
    let mut in_flight: Option<tokio::task::JoinHandle<Result<Option<Vec<WorkerRow>>>>> = None;
    let mut outage = Outage::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        health.beat();
        if in_flight.as_ref().is_some_and(|h| !h.is_finished()) {
            outage.failed("the previous publish is still running");
            continue;
        }
        row.last_beat_at = Utc::now();
        row.state = if health.is_draining() {
            "draining"
        } else {
            "running"
        }
        .to_owned();
        // The write runs as its own task, so the bound below stops the
        // waiting, never the write mid-transaction.
        let mut publish = {
            let (store, row) = (store.clone(), row.clone());
            tokio::spawn(async move {
                store.worker_beat(&row).await?;
                // A failed read keeps the last view: the spread is a
                // preference, not a fence.
                Ok::<_, crate::error::Error>(store.worker_list().await.ok())
            })
        };
        match tokio::time::timeout(interval, &mut publish).await {
            Ok(Ok(Ok(rows))) => {
                outage.recovered();
                if let Some(rows) = rows {
                    let next = super::spread::Peers::from_rows(&row.id, &row.lanes, &rows);
                    peers.send_if_modified(|p| {
                        let changed = *p != next;
                        *p = next;
                        changed
                    });
                }
            }
            Ok(Ok(Err(e))) => outage.failed(&e.to_string()),
            Ok(Err(e)) => outage.failed(&format!("publish task failed: {e}")),
            Err(_) => {
                outage.failed("timed out");
                in_flight = Some(publish);
            }
        }
    }
}

/// Logs a run of failures once: a warning when the first one happens, an
/// info line with the count when a publish lands again.
#[derive(Debug, Default)]
struct Outage {
    failures: u64,
}

impl Outage {
    fn failed(&mut self, why: &str) {
        if self.failures == 0 {
            tracing::warn!(error = %why, "liveness publish failing; retrying every beat, logged once");
        } else {
            tracing::debug!(error = %why, failures = self.failures + 1, "liveness publish still failing");
        }
        self.failures += 1;
    }

    fn recovered(&mut self) {
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "liveness publish recovered");
        }
        self.failures = 0;
    }
}

/// The host name, for the workers table.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}
