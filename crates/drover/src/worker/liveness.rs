//! Liveness: the in-memory beat `/healthz` answers from, the best-effort
//! publication of the worker row, and the HTTP listener for `/healthz` and
//! `/metrics`.
//!
//! Invariant: claiming never waits on liveness. The beat is an atomic store;
//! the publication runs in its own task, bounded by the beat interval, and a
//! failed publish is logged and forgotten.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use chrono::Utc;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Opaque, Result};
use crate::store::{Store, WorkerRow};

/// The worker's health as `/healthz` reports it.
#[derive(Debug)]
pub struct Health {
    beat_ms: AtomicI64,
    loop_ms: AtomicI64,
    draining: AtomicBool,
    stale_after: Duration,
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
        }
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

async fn healthz(State(health): State<Arc<Health>>) -> (StatusCode, &'static str) {
    if health.is_healthy() {
        (StatusCode::OK, "ok\n")
    } else if health.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stale\n")
    }
}

async fn metrics_text() -> (StatusCode, String) {
    match prometheus() {
        Some(h) => (StatusCode::OK, h.render()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "another metrics recorder is installed in this process\n".to_owned(),
        ),
    }
}

/// Binds the listener and serves `/healthz` and `/metrics` until `stop`.
/// Returns the bound address (useful with port 0).
///
/// # Errors
/// [`Error::Config`] when the address cannot be bound.
pub(crate) async fn serve(
    addr: SocketAddr,
    health: Arc<Health>,
    stop: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let _ = prometheus();
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::Config(format!(
            "cannot listen on {addr} for /healthz and /metrics (the metrics address: \
                 --metrics-addr or DROVER_METRICS_ADDR, WorkerBuilder::metrics_addr in code; \
                 `off` / None serves none): {e}"
        ))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Unavailable(Opaque::new(e)))?;
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .with_state(health);
    let task = tokio::spawn(async move {
        let r = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "metrics listener stopped");
        }
    });
    Ok((bound, task))
}

/// Beats in memory every `interval` and publishes the row, best effort.
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
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut row = row;
    let mut in_flight: Option<tokio::task::JoinHandle<Result<()>>> = None;
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
            tokio::spawn(async move { store.worker_beat(&row).await })
        };
        match tokio::time::timeout(interval, &mut publish).await {
            Ok(Ok(Ok(()))) => outage.recovered(),
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
