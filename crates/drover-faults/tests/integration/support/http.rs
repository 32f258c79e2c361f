//! Workers over HTTP for the fault scenarios: the API's router served on
//! loopback over the run's queue (what `drover serve` runs), a worker
//! token, and a sweep task; the HTTP worker itself is
//! `drover_faults::http_worker` (re-exported here).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use drover::Queue;
use drover_http::{ApiPrincipal, Auth, HttpConfig, Role, TokenSecret};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[allow(unused_imports)]
pub use drover_faults::http_worker::*;

/// The API served in this process on one address, restartable there.
pub struct Server {
    pub addr: SocketAddr,
    drain: CancellationToken,
    task: JoinHandle<()>,
}

/// A worker token for `lanes` (every kind), held in memory as `serve`
/// holds its one-time token; the token's text.
pub fn worker_auth(lanes: &[&str]) -> (Auth, String) {
    let secret = TokenSecret::generate();
    let principal = ApiPrincipal {
        token_id: uuid::Uuid::now_v7(),
        role: Role::Worker,
        tenant: None,
        enqueue: vec![],
        work: lanes.iter().map(|l| format!("{l}:*")).collect(),
    };
    (
        Auth::deny_all().with_token(&secret, principal),
        secret.expose().to_owned(),
    )
}

impl Server {
    /// Serves the API over `queue` on `addr` (port 0: any free port).
    pub async fn start(queue: Queue, auth: Auth, addr: SocketAddr) -> Server {
        let drain = CancellationToken::new();
        let config = HttpConfig {
            shutdown: drain.clone(),
            ..HttpConfig::default()
        };
        let app = drover_http::router_with(queue, auth, config);
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = drain.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
        });
        Server { addr, drain, task }
    }

    /// Stops as `drover serve` does on SIGTERM: long polls end (503,
    /// Retry-After), requests in flight finish, the listener closes.
    pub async fn stop(self) {
        self.drain.cancel();
        let _ = self.task.await;
    }
}

/// Hands lease-expired items back, as a worker's sweep does, until `stop`.
pub fn sweeper(queue: Queue, every: Duration, stop: CancellationToken) -> JoinHandle<u64> {
    tokio::spawn(async move {
        let mut rescued = 0;
        while !stop.is_cancelled() {
            if let Ok(r) = queue.requeue_stale(1000).await {
                rescued += r.requeued + r.dead_lettered;
            }
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(every) => {}
            }
        }
        rescued
    })
}
