//! The HTTP listener a worker serves when given a metrics address:
//! `/healthz`, `/readyz` and `/metrics` (axum). Compiled with the
//! `metrics-listener` feature only, so a producer-only service that leaves
//! it off builds no HTTP stack.
//!
//! Invariants: `/healthz` never touches the database (a slow database must
//! not get a live worker restarted); `/readyz` does (reachable, migrations
//! current), bounded by [`READY_CHECK_TIMEOUT`], and answers 503 without
//! asking the database once draining has begun.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::liveness::{Health, READY_CHECK_TIMEOUT, prometheus, register_metrics};
use crate::error::{Error, Opaque, Result};
use crate::store::Store;

async fn healthz(State(health): State<Arc<Health>>) -> (StatusCode, String) {
    if health.is_healthy() {
        // Alive (a restart cures neither a poison event nor a source that
        // is down: the roles keep running and retrying) but visibly
        // degraded, one line per failing role.
        let failing = health.failing();
        let mut body = if failing.is_empty() {
            "ok\n"
        } else {
            "ok; degraded\n"
        }
        .to_owned();
        for (who, detail) in failing {
            body.push_str(&format!("failing: {who}: {detail}\n"));
        }
        (StatusCode::OK, body)
    } else if health.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n".to_owned())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stale\n".to_owned())
    }
}

/// What `/readyz` needs: the health (draining, stale) and the store.
#[derive(Clone)]
struct Probe {
    health: Arc<Health>,
    store: Arc<dyn Store>,
}

/// Why a worker is not ready, or `None` when it is: draining, stale, the
/// database unreachable within [`READY_CHECK_TIMEOUT`], or migrations behind
/// this binary. Draining is checked first and without the database, so the
/// answer turns 503 the moment shutdown begins.
async fn not_ready(health: &Health, store: &dyn Store) -> Option<String> {
    if health.is_draining() {
        return Some("draining".to_owned());
    }
    if !health.is_healthy() {
        return Some("stale".to_owned());
    }
    match tokio::time::timeout(READY_CHECK_TIMEOUT, store.migration_status()).await {
        Err(_) => Some(format!(
            "database unreachable: no answer within {READY_CHECK_TIMEOUT:?}"
        )),
        Ok(Err(e)) => Some(format!("database unreachable: {e}")),
        Ok(Ok(m)) if !m.is_current() => Some(m.to_string()),
        Ok(Ok(_)) => None,
    }
}

async fn readyz(State(probe): State<Probe>) -> (StatusCode, String) {
    match not_ready(&probe.health, probe.store.as_ref()).await {
        None => (StatusCode::OK, "ready\n".to_owned()),
        Some(why) => {
            tracing::debug!(why, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            )
        }
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

/// Binds the listener and serves `/healthz`, `/readyz` and `/metrics`
/// until `stop`. Returns the bound address (useful with port 0).
///
/// # Errors
/// [`Error::Config`] when the address cannot be bound.
pub(crate) async fn serve(
    addr: SocketAddr,
    health: Arc<Health>,
    store: Arc<dyn Store>,
    stop: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    if prometheus().is_some() {
        register_metrics();
    }
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::Config(format!(
            "cannot listen on {addr} for /healthz, /readyz and /metrics (the metrics address: \
                 --metrics-addr or DROVER_METRICS_ADDR, WorkerBuilder::metrics_addr in code; \
                 `off` / None serves none): {e}"
        ))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Unavailable(Opaque::new(e)))?;
    let probe = Probe {
        health: health.clone(),
        store,
    };
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .with_state(health)
        .merge(
            Router::new()
                .route("/readyz", get(readyz))
                .with_state(probe),
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A failing projector shows in `/healthz` (still 200: the worker is
    /// alive and retrying), and goes once it recovers.
    #[tokio::test]
    async fn healthz_names_a_failing_role() {
        let health = Arc::new(Health::new(Duration::from_secs(10)));
        health.set_failing("projector orders", Some("2 tenants failing".into()));
        let (code, body) = healthz(State(health.clone())).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            body,
            "ok; degraded\nfailing: projector orders: 2 tenants failing\n"
        );
        health.set_failing("projector orders", None);
        let (code, body) = healthz(State(health)).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "ok\n"));
    }
}
