//! drover's HTTP API: enqueue from any language, inspect, retry and
//! cancel, behind bearer tokens, default-deny.
//!
//! [`router`] builds an [`axum::Router`] over a [`drover::Queue`] that a
//! service mounts in its own application under any prefix, or that
//! `drover serve` runs on its own:
//!
//! ```no_run
//! # async fn f(queue: drover::Queue) {
//! use drover_http::{Auth, ApiPrincipal, Role, TokenSecret};
//!
//! let secret = TokenSecret::generate();
//! let admin = ApiPrincipal { token_id: uuid::Uuid::now_v7(), role: Role::Admin, tenant: None, enqueue: vec!["*".into()], work: vec![] };
//! let app = axum::Router::new().nest("/ops", drover_http::router(queue, Auth::deny_all().with_token(&secret, admin)));
//! # }
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`auth`] | tokens, principals and roles, the default-deny middleware |
//! | [`tokens`] | durable tokens: minting, the store-backed lookup |
//! | [`problem`] | RFC 9457 problem details, the one error body |
//! | [`head`] | the request head's limits (414, 431 as problems) |
//! | [`api`] | the JSON routes under `/v1` and the health probes |
//! | [`dashboard`] | the server-rendered pages under `/ui`, their sessions and CSRF check |
//!
//! Invariants: every route but exactly `/healthz`, `/readyz` and
//! `/v1/openapi.json` needs a credential ([`auth`]); every error is `application/problem+json`
//! ([`problem`]); a tenant-scoped principal's reads and writes go to the
//! store under its tenant, so PostgreSQL's row-level security bounds them
//! whatever a handler asks; every response carries
//! `X-Content-Type-Options: nosniff`, so no browser reads a JSON answer
//! (or a problem) as anything but what its content type says.

mod actors;
pub mod api;
pub mod auth;
pub mod bulk;
pub mod dashboard;
mod filter;
pub mod head;
pub mod problem;
pub mod tokens;

use std::sync::Arc;

use axum::Router;
use drover::Queue;

pub use auth::{ApiPrincipal, Auth, Role, TokenHash, TokenLookup, TokenSecret};
pub use problem::Problem;

/// The largest request body accepted by default (a batch of items): 8 MiB.
/// A single item's payload is bounded by the queue's own limit.
pub const MAX_BODY_BYTES_DEFAULT: usize = 8 * 1024 * 1024;

/// Settings of the HTTP API.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The largest request body; larger ones answer 413. Default
    /// [`MAX_BODY_BYTES_DEFAULT`].
    pub max_body_bytes: usize,
    /// The dashboard's settings.
    pub dashboard: dashboard::DashboardConfig,
    /// Request gathering of single-item enqueues ([`api::gather`]).
    pub gather: api::gather::GatherConfig,
    /// Cancelled when the server starts draining: the worker routes'
    /// claims and long polls then answer 503 with `Retry-After`
    /// ([`api::work`]). `drover serve` cancels it on SIGTERM / SIGINT,
    /// before finishing the requests in flight.
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body_bytes: MAX_BODY_BYTES_DEFAULT,
            dashboard: dashboard::DashboardConfig::default(),
            gather: api::gather::GatherConfig::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
        }
    }
}

/// What every handler shares: the queue, the authentication, the settings.
#[derive(Clone)]
pub struct AppState {
    /// The queue the API operates.
    pub queue: Queue,
    /// How requests are authenticated.
    pub auth: Auth,
    /// The settings.
    pub config: Arc<HttpConfig>,
    /// The process's request gatherer.
    pub gather: Arc<api::gather::Gatherer>,
    /// The shared live view: the one count set per interval that the
    /// dashboard's pages and the API's `/v1/lanes` and `/v1/stats` answer
    /// from, so their cost does not grow with the callers.
    pub live: Arc<dashboard::live::Live>,
    /// The HTTP workers this process has heard from (their liveness rows).
    pub work: Arc<api::work::HttpWorkers>,
}

/// The API's router over `queue`, authenticated by `auth`, with default
/// settings. Mount it under a prefix with [`axum::Router::nest`]; the open
/// paths are `/healthz`, `/readyz` and `/v1/openapi.json` relative to that
/// prefix.
pub fn router(queue: Queue, auth: Auth) -> Router {
    router_with(queue, auth, HttpConfig::default())
}

/// As [`router`], with explicit settings.
pub fn router_with(queue: Queue, auth: Auth, config: HttpConfig) -> Router {
    router_and_stats(queue, auth, config).0
}

/// As [`router_with`], also handing back the request gatherer's counters
/// (batches and requests written), which tests and `drover bench --http`
/// read.
pub fn router_and_stats(
    queue: Queue,
    auth: Auth,
    config: HttpConfig,
) -> (Router, Arc<api::gather::GatherStats>) {
    let gather = Arc::new(api::gather::Gatherer::new(
        queue.clone(),
        config.gather.clone(),
    ));
    let stats = gather.stats();
    let live = dashboard::live::Live::new(queue.clone(), config.dashboard.live_interval);
    let state = AppState {
        queue,
        auth: auth.clone(),
        config: Arc::new(config),
        gather,
        live,
        work: Arc::default(),
    };
    let (api, _spec) = api::routes(state.clone()).split_for_parts();
    let api = Router::new()
        .merge(api)
        .fallback(api::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(
            state.config.max_body_bytes,
        ))
        .layer(axum::middleware::map_response(problem::problemize))
        .layer(axum::middleware::from_fn_with_state(
            auth,
            auth::require_auth,
        ));
    // The dashboard has its own gate (a session cookie, the CSRF check),
    // so it is merged outside the bearer-token layer.
    let router = dashboard::routes(state.clone(), state.config.dashboard.clone())
        .merge(api)
        .layer(axum::middleware::from_fn(head::limit))
        .layer(axum::middleware::map_response(nosniff));
    (router, stats)
}

/// Marks every response `X-Content-Type-Options: nosniff` (the outermost
/// layer, so the head limits' and the authentication's answers carry it
/// too).
async fn nosniff(mut res: axum::response::Response) -> axum::response::Response {
    res.headers_mut().insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    res
}
