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
//! let admin = ApiPrincipal { token_id: uuid::Uuid::now_v7(), role: Role::Admin, tenant: None, enqueue: vec!["*".into()] };
//! let app = axum::Router::new().nest("/ops", drover_http::router(queue, Auth::deny_all().with_token(&secret, admin)));
//! # }
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`auth`] | tokens, principals and roles, the default-deny middleware |
//! | [`tokens`] | durable tokens: minting, the store-backed lookup |
//! | [`problem`] | RFC 9457 problem details, the one error body |
//! | [`api`] | the JSON routes under `/v1` and the health probes |
//! | [`dashboard`] | the server-rendered pages under `/ui`, their sessions and CSRF check |
//!
//! Invariants: every route but exactly `/healthz` and `/readyz` needs a
//! credential ([`auth`]); every error is `application/problem+json`
//! ([`problem`]); a tenant-scoped principal's reads and writes go to the
//! store under its tenant, so PostgreSQL's row-level security bounds them
//! whatever a handler asks.

pub mod api;
pub mod auth;
pub mod dashboard;
mod filter;
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
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body_bytes: MAX_BODY_BYTES_DEFAULT,
            dashboard: dashboard::DashboardConfig::default(),
            gather: api::gather::GatherConfig::default(),
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
}

/// The API's router over `queue`, authenticated by `auth`, with default
/// settings. Mount it under a prefix with [`axum::Router::nest`]; the open
/// paths are `/healthz` and `/readyz` relative to that prefix.
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
    let router = dashboard::routes(state.clone(), state.config.dashboard.clone()).merge(api);
    (router, stats)
}
