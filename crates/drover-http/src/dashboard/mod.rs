//! The dashboard: server-rendered pages over the same queue as the API,
//! closed by default.
//!
//! | part | owns |
//! |---|---|
//! | this module | the routes, the security headers, the session gate |
//! | [`session`] | sessions, cookies, the CSRF check |
//! | [`live`] | the one query set per interval every tab shares |
//! | [`charts`] | the overview's SVG charts, with labelled axes |
//! | `overview` | the installation's overview: alerts, per-lane and per-kind tables, charts |
//! | `pages` | the lanes page (GET), the pieces every page shares |
//! | `item` | the item page: runs, why it waits, audit by actor |
//! | `dead` | the dead letter grouped by kind and normalised error, "retry all in this group" |
//! | `fmt` | relative and absolute times, durations, short ids |
//! | `roles` | workers, schedules, orchestrations and one orchestration (GET) |
//! | `roles_act` | trigger a schedule; cancel, resume, signal an orchestration (POST) |
//! | `lists` | the items and dead-letter lists (GET) |
//! | `actions` | login, logout, retry, cancel, pause, resume, set and clear a limit, reopen a closed group (POST) |
//! | `tenant` | the overview of a tenant-scoped viewer: its own counts |
//! | `limits` | the limits in force as the lanes page shows them |
//!
//! Invariants:
//! - Every page but the login form needs a session; without one a page
//!   answers `303` to the login form, which itself answers `401` (so no
//!   route answers 2xx without credentials; the static assets, which hold
//!   no data, are the one exception).
//! - Every state-changing request is a POST that passes the CSRF check
//!   ([`session::check`]); a GET never changes anything.
//! - Every response carries a strict Content-Security-Policy: scripts and
//!   styles only from the dashboard's own embedded files, no inline
//!   script, no framing.
//! - A tenant-scoped token sees only its tenant's items (a list asked for
//!   another tenant is refused, 403, as the API refuses it); the
//!   installation-wide views (counts, lanes, workers with their hosts and
//!   process ids, schedules) need a token of no tenant, on the pages as in
//!   the API.
//! - A page's `back` link is followed only to a path of the dashboard's
//!   own, without dot segments (`actions::is_own_page`).
//! - Payloads of the kinds [`DashboardConfig::redact`] names are shown
//!   with those fields replaced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::AppState;

mod actions;
mod batches;
pub mod charts;
mod dead;
mod fmt;
mod item;
mod limits;
mod lists;
pub mod live;
mod overview;
mod pages;
mod roles;
mod roles_act;
pub mod session;
mod tenant;

/// The dashboard's path under the router.
pub const BASE: &str = "/ui";

/// The Content-Security-Policy of every dashboard response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The largest dashboard request body (forms): 64 KiB.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// Settings of the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// The prefix the host nests the router under (`""` when it is not
    /// nested), so the pages' links and the cookie's path are right.
    pub mount_path: String,
    /// Mark the session cookie `Secure`: set it when the dashboard is
    /// served over TLS (directly or behind a TLS-terminating proxy).
    pub secure_cookie: bool,
    /// How long a session lasts from login. Default
    /// [`session::SESSION_TTL_DEFAULT`].
    pub session_ttl: Duration,
    /// How often the live view is refreshed. Default
    /// [`live::LIVE_INTERVAL_DEFAULT`].
    pub live_interval: Duration,
    /// Per kind, the top-level payload fields shown as `"[redacted]"`;
    /// `"*"` hides the whole payload.
    pub redact: BTreeMap<String, Vec<String>>,
    /// The schedules this server declares (the host binary's), which the
    /// schedules page can trigger now; the others are listed only.
    pub schedules: ScheduleTriggers,
}

/// The schedules a server can trigger: the compiled schedules of the
/// binary that serves the dashboard (its payloads are in the code, not in
/// the state table, so only a binary that declares a schedule can enqueue
/// its item). Empty by default (`drover serve` declares the heartbeat
/// schedule when it is configured, as `drover schedules` does).
#[derive(Clone, Default)]
pub struct ScheduleTriggers(Vec<drover::periodic::Compiled>);

impl ScheduleTriggers {
    /// The triggers of `schedules`.
    pub fn new(schedules: Vec<drover::periodic::Compiled>) -> Self {
        ScheduleTriggers(schedules)
    }

    /// Whether this server declares the schedule `name`.
    pub fn declares(&self, name: &str) -> bool {
        self.0.iter().any(|s| s.name() == name)
    }

    /// The schedule `name`, when this server declares it.
    pub fn get(&self, name: &str) -> Option<&drover::periodic::Compiled> {
        self.0.iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Debug for ScheduleTriggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|s| s.name()))
            .finish()
    }
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            mount_path: String::new(),
            secure_cookie: false,
            session_ttl: session::SESSION_TTL_DEFAULT,
            live_interval: live::LIVE_INTERVAL_DEFAULT,
            redact: BTreeMap::new(),
            schedules: ScheduleTriggers::default(),
        }
    }
}

impl DashboardConfig {
    /// The payload as the dashboard shows it: redacted per kind.
    pub fn redacted(&self, kind: &str, payload: &serde_json::Value) -> serde_json::Value {
        let Some(fields) = self.redact.get(kind) else {
            return payload.clone();
        };
        if fields.iter().any(|f| f == "*") {
            return serde_json::Value::String("[redacted]".into());
        }
        let mut out = payload.clone();
        if let Some(obj) = out.as_object_mut() {
            for f in fields {
                if let Some(v) = obj.get_mut(f) {
                    *v = serde_json::Value::String("[redacted]".into());
                }
            }
        }
        out
    }

    /// The dashboard's absolute path prefix.
    pub fn base(&self) -> String {
        format!("{}{BASE}", self.mount_path.trim_end_matches('/'))
    }
}

/// What the dashboard's handlers share.
#[derive(Clone)]
pub struct DashState {
    /// The API's state (queue, auth, settings).
    pub app: AppState,
    /// The logged-in browsers.
    pub sessions: session::Sessions,
    /// The shared live view.
    pub live: Arc<live::Live>,
    /// The settings.
    pub config: Arc<DashboardConfig>,
}

/// The dashboard's routes under [`BASE`], with their own session gate and
/// security headers (the API's bearer-token gate is not in front of them).
pub fn routes(app: AppState, config: DashboardConfig) -> Router {
    let state = DashState {
        live: app.live.clone(),
        sessions: session::Sessions::new(config.session_ttl),
        app,
        config: Arc::new(config),
    };
    routes_with(state)
}

/// As [`routes`], over a state the caller built (tests read its live view).
pub fn routes_with(state: DashState) -> Router {
    Router::new()
        .route(BASE, get(|| async { Redirect::to("ui/") }))
        .route(&format!("{BASE}/"), get(overview_page))
        .route(&format!("{BASE}/live"), get(overview::live_events))
        .route(&format!("{BASE}/items"), get(lists::items))
        .route(&format!("{BASE}/items/{{tenant}}/{{id}}"), get(item::item))
        .route(&format!("{BASE}/dead"), get(lists::dead))
        .route(&format!("{BASE}/lanes"), get(pages::lanes))
        .route(&format!("{BASE}/workers"), get(roles::workers))
        .route(&format!("{BASE}/schedules"), get(roles::schedules))
        .route(
            &format!("{BASE}/schedules/act"),
            post(roles_act::schedules_act),
        )
        .route(
            &format!("{BASE}/orchestrations"),
            get(roles::orchestrations),
        )
        .route(
            &format!("{BASE}/orchestrations/{{tenant}}/{{id}}"),
            get(roles::orchestration),
        )
        .route(
            &format!("{BASE}/orchestrations/act"),
            post(roles_act::orchestrations_act),
        )
        .route(&format!("{BASE}/batches"), get(batches::batches))
        .route(
            &format!("{BASE}/login"),
            get(pages::login_form).post(actions::login),
        )
        .route(&format!("{BASE}/logout"), post(actions::logout))
        .route(&format!("{BASE}/items/act"), post(actions::items_act))
        .route(&format!("{BASE}/dead/retry-group"), post(dead::retry_group))
        .route(&format!("{BASE}/lanes/act"), post(actions::lanes_act))
        .route(&format!("{BASE}/limits/act"), post(actions::limits_act))
        .route(&format!("{BASE}/assets/htmx.min.js"), get(asset_htmx))
        .route(&format!("{BASE}/assets/dashboard.js"), get(asset_js))
        .route(&format!("{BASE}/assets/dashboard.css"), get(asset_css))
        .route(&format!("{BASE}/assets/favicon.svg"), get(asset_icon))
        .route("/favicon.ico", get(asset_icon))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(state)
}

/// The overview: a tenant-scoped viewer's own tenant's ([`tenant`]),
/// else the installation's ([`overview::overview`], which also sends a
/// browser without a session to the login form). The session's scope is
/// read from the session store (no token lookup) to choose; the chosen
/// page checks the session's token as every page does.
async fn overview_page(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<pages::MsgQuery>,
) -> Response {
    let scoped = session::cookie_id(&headers)
        .and_then(|id| st.sessions.get(&id))
        .is_some_and(|s| s.principal.tenant.is_some());
    if scoped {
        return tenant::overview(st, headers, q).await;
    }
    overview::overview(State(st), headers, Query(q)).await
}

/// Adds the security headers to every dashboard response.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

const HTMX: &str = include_str!("../../assets/htmx.min.js");
const JS: &str = include_str!("../../assets/dashboard.js");
const CSS: &str = include_str!("../../assets/dashboard.css");
const ICON: &str = include_str!("../../assets/favicon.svg");

fn asset(body: &'static str, mime: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn asset_htmx() -> Response {
    asset(HTMX, "text/javascript; charset=utf-8")
}
async fn asset_js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}
async fn asset_css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}
async fn asset_icon() -> Response {
    asset(ICON, "image/svg+xml")
}
