//! The dashboard's state-changing requests, every one a POST that passes
//! the CSRF check ([`super::session::check`]) before it reads its form;
//! operations also need the operator role and a server not in read-only
//! mode. Each answers 303 back to the page it came from, with a message.

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use drover::store::limits::LimitScope;
use uuid::Uuid;

use super::DashState;
use super::pages::{LoginPage, Viewer, render, viewer};
use super::session::{self, CsrfRefusal};
use crate::auth::{Role, TokenSecret};

/// The most items one bulk request acts on.
pub const BULK_MAX: usize = 500;

/// Percent-encodes a query value.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub(super) fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn refused(r: CsrfRefusal) -> Response {
    tracing::warn!(
        reason = r.reason(),
        "a dashboard POST was refused by the CSRF check"
    );
    (StatusCode::FORBIDDEN, r.reason()).into_response()
}

/// The session and the CSRF check of an operation; the answer to give when
/// either fails.
pub(super) async fn gate(
    st: &DashState,
    headers: &HeaderMap,
    form: &[(String, String)],
) -> Result<Viewer, Box<Response>> {
    let v = match viewer(st, headers).await {
        Ok(v) => v,
        Err(_) => {
            return Err(Box::new(
                (StatusCode::UNAUTHORIZED, "log in first").into_response(),
            ));
        }
    };
    session::check(headers, &v.session, field(form, "csrf")).map_err(|r| Box::new(refused(r)))?;
    Ok(v)
}

pub(super) fn operator_gate(st: &DashState, v: &Viewer) -> Result<(), Box<Response>> {
    if st.app.auth.is_read_only() {
        return Err(Box::new(
            (StatusCode::FORBIDDEN, "the dashboard is in read-only mode").into_response(),
        ));
    }
    if !v.session.principal.has(Role::Operator) {
        return Err(Box::new(
            (StatusCode::FORBIDDEN, "this needs the operator role").into_response(),
        ));
    }
    Ok(())
}

/// True when `back` is one of the dashboard's own pages: a path under
/// `{base}/` of visible ASCII, with no empty, `.` or `..` segment (written
/// plainly or percent-encoded), no backslash and no fragment, then an
/// optional query. Anything else could leave the dashboard once a browser
/// resolves it (`/ui/../../x`, `//host`, `/ui/%2e%2e/`).
pub(super) fn is_own_page(base: &str, back: &str) -> bool {
    if !back.bytes().all(|b| (0x21..=0x7e).contains(&b)) || back.contains(['\\', '#']) {
        return false;
    }
    let path = back.split_once('?').map_or(back, |(p, _)| p);
    let Some(rest) = path.strip_prefix(base).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    let lower = rest.to_ascii_lowercase();
    if lower.contains("%2e") || lower.contains("%2f") || lower.contains("%5c") {
        return false;
    }
    let mut segments = rest.split('/').peekable();
    while let Some(seg) = segments.next() {
        // An empty last segment is the trailing slash of `/ui/`.
        if seg == "." || seg == ".." || (seg.is_empty() && segments.peek().is_some()) {
            return false;
        }
    }
    true
}

/// Back to `back` when it is one of the dashboard's own pages
/// ([`is_own_page`]: never an open redirect, never a path outside the
/// dashboard), else the overview; with `msg`.
pub(super) fn back_to(st: &DashState, back: Option<&str>, msg: &str) -> Response {
    let base = st.config.base();
    let target = back
        .filter(|b| is_own_page(&base, b))
        .map_or_else(|| format!("{base}/"), str::to_owned);
    let sep = if target.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{target}{sep}msg={}", encode(msg))).into_response()
}

/// The login form's fields.
#[derive(Debug, serde::Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// Logs in with an API token: the token is checked once, a session
/// starts, and its cookie is set. A wrong token answers the form again
/// with 401.
pub(super) async fn login(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(r) = session::check_origin(&headers) {
        return refused(r);
    }
    let secret = TokenSecret::from_presented(form.token.trim());
    let principal = match st.app.auth.authenticate(&secret).await {
        // A worker token reads nothing: it opens no dashboard session.
        Ok(Some(p)) if p.role == crate::auth::Role::Worker => {
            return render(
                &LoginPage {
                    base: st.config.base(),
                    error: Some("a worker token cannot open the dashboard".into()),
                },
                StatusCode::FORBIDDEN,
            );
        }
        Ok(Some(p)) => p,
        Ok(None) => {
            // Never the token nor its hash: only that a login failed.
            tracing::warn!("dashboard login refused: the token is unknown or revoked");
            return render(
                &LoginPage {
                    base: st.config.base(),
                    error: Some("the token is unknown or revoked".into()),
                },
                StatusCode::UNAUTHORIZED,
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "dashboard login could not check the token");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the token store is unavailable",
            )
                .into_response();
        }
    };
    tracing::info!(token = %principal.token_id, role = principal.role.as_str(), "dashboard login");
    let id = st.sessions.create(principal, secret.hash());
    let cookie = session::set_cookie(
        &id,
        &st.config.base(),
        st.config.secure_cookie,
        st.config.session_ttl,
    );
    let mut res = Redirect::to(&format!("{}/", st.config.base())).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

/// Ends the session.
pub(super) async fn logout(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    st.sessions.remove(&v.id);
    let mut res = Redirect::to(&format!("{}/login", st.config.base())).into_response();
    if let Ok(c) = HeaderValue::from_str(&session::clear_cookie(
        &st.config.base(),
        st.config.secure_cookie,
    )) {
        res.headers_mut().insert(header::SET_COOKIE, c);
    }
    res
}

/// Retries or cancels the selected items (`item` = `tenant/id`, repeated;
/// at most [`BULK_MAX`]), each audited with the token as actor.
pub(super) async fn items_act(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Err(r) = operator_gate(&st, &v) {
        return *r;
    }
    let back = field(&form, "back");
    let action = field(&form, "action").unwrap_or("");
    if action != "retry" && action != "cancel" {
        return back_to(&st, back, "choose retry or cancel");
    }
    let picked: Vec<&str> = form
        .iter()
        .filter(|(k, _)| k == "item")
        .map(|(_, v)| v.as_str())
        .collect();
    if picked.is_empty() {
        return back_to(&st, back, "no item selected");
    }
    if picked.len() > BULK_MAX {
        return back_to(&st, back, &format!("at most {BULK_MAX} items per request"));
    }
    let p = &v.session.principal;
    let (mut done, mut refused_n, mut missing) = (0usize, 0usize, 0usize);
    for sel in picked {
        let parsed = sel
            .split_once('/')
            .and_then(|(t, i)| Some((t.parse::<Uuid>().ok()?, i.parse::<Uuid>().ok()?)));
        let Some((asked, id)) = parsed else {
            missing += 1;
            continue;
        };
        let Ok(tenant) = p.tenant_for(Some(asked)) else {
            missing += 1;
            continue;
        };
        let qp = p.queue_principal(tenant, None);
        let r = if action == "retry" {
            st.app.queue.retry(&qp, tenant, id).await
        } else {
            st.app.queue.cancel(&qp, tenant, id).await
        };
        match r {
            Ok(_) => done += 1,
            Err(e) if e.kind() == drover::ErrorKind::NotFound => missing += 1,
            Err(e) if e.kind() == drover::ErrorKind::Conflict => refused_n += 1,
            Err(e) => {
                st.live.dead_scan_stale().await;
                return back_to(&st, back, &format!("{action} stopped after {done}: {e}"));
            }
        }
    }
    // The dead letter's groups show the change at once.
    st.live.dead_scan_stale().await;
    let verb = if action == "retry" {
        "retried"
    } else {
        "cancelled"
    };
    let mut msg = format!("{verb} {done}");
    if refused_n > 0 {
        msg.push_str(&format!(
            ", {refused_n} refused (not in a state that allows it)"
        ));
    }
    if missing > 0 {
        msg.push_str(&format!(", {missing} not found"));
    }
    back_to(&st, back, &msg)
}

/// Pauses or resumes a lane.
pub(super) async fn lanes_act(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Err(r) = operator_gate(&st, &v) {
        return *r;
    }
    let back = format!("{}/lanes", st.config.base());
    let lane = field(&form, "lane").unwrap_or("");
    let p = &v.session.principal;
    let qp = p.queue_principal(p.tenant.unwrap_or_else(Uuid::nil), None);
    let r = match field(&form, "action") {
        Some("pause") => st.app.queue.lane_pause(&qp, lane).await,
        Some("resume") => st.app.queue.lane_resume(&qp, lane).await,
        _ => return back_to(&st, Some(&back), "choose pause or resume"),
    };
    match r {
        Ok(s) => back_to(
            &st,
            Some(&back),
            &format!(
                "lane {} {}",
                s.lane,
                if s.paused { "paused" } else { "resumed" }
            ),
        ),
        Err(e) => back_to(&st, Some(&back), &e.to_string()),
    }
}

/// Sets (`action=set`, with `scope`, `name`, `concurrency`) or clears
/// (`action=clear`, with `scope`, `name`) an operator's limit, then back
/// to the lanes page with what happened. As over HTTP (`api/limits.rs`):
/// the operator role and a token scoped to no tenant, since a limit
/// counts every tenant's items.
pub(super) async fn limits_act(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Err(r) = operator_gate(&st, &v) {
        return *r;
    }
    if v.session.principal.tenant.is_some() {
        return (
            StatusCode::FORBIDDEN,
            "a limit counts every tenant's items: use a token not scoped to a tenant",
        )
            .into_response();
    }
    let back = format!("{}/lanes", st.config.base());
    let back = Some(back.as_str());
    let scope = LimitScope::from_parts(
        field(&form, "scope").unwrap_or(""),
        field(&form, "name").unwrap_or("").trim(),
    )
    .and_then(|s| s.validate().map(|()| s));
    let scope = match scope {
        Ok(s) => s,
        Err(e) => return back_to(&st, back, &e.to_string()),
    };
    let principal = v.session.principal.queue_principal(Uuid::nil(), None);
    let msg = match field(&form, "action") {
        Some("set") => {
            let Ok(n) = field(&form, "concurrency")
                .unwrap_or("")
                .trim()
                .parse::<u32>()
            else {
                return back_to(&st, back, "concurrency: a whole number from 1 to 100000");
            };
            // `order`: none, or an ordered group going on past a dead
            // letter (`continue`) or holding on one (`hold`).
            let spec = match field(&form, "order").unwrap_or("none") {
                "none" | "" => drover::store::limits::LimitSpec::concurrency(n),
                rule => match drover::store::limits::OnDeadLetter::from_name(rule) {
                    Ok(r) => drover::store::limits::LimitSpec {
                        concurrency: n,
                        ..drover::store::limits::LimitSpec::ordered(r)
                    },
                    Err(e) => return back_to(&st, back, &e.to_string()),
                },
            };
            match st.app.queue.limit_set(&principal, &scope, spec).await {
                Ok(s) => format!("limit on {} set to {}", s.scope, s.spec()),
                Err(e) => e.to_string(),
            }
        }
        Some("clear") => match st.app.queue.limit_clear(&principal, &scope).await {
            Ok(true) => format!("operator limit on {scope} cleared"),
            Ok(false) => format!("no operator limit on {scope} to clear"),
            Err(e) => e.to_string(),
        },
        Some("reopen") => {
            let group = field(&form, "group")
                .map(str::trim)
                .filter(|g| !g.is_empty());
            let tenant = match field(&form, "tenant")
                .map(str::trim)
                .filter(|t| !t.is_empty())
            {
                None => Uuid::nil(),
                Some(t) => match Uuid::parse_str(t) {
                    Ok(t) => t,
                    Err(_) => return back_to(&st, back, "tenant: a UUID"),
                },
            };
            let what = match group {
                Some(g) => format!("group {g} of kind {}", scope.name()),
                None => format!("kind {}", scope.name()),
            };
            match st
                .app
                .queue
                .reopen(&principal, scope.name(), tenant, group)
                .await
            {
                Ok(true) => format!("{what} reopened"),
                Ok(false) => format!("{what} was not closed"),
                Err(e) => e.to_string(),
            }
        }
        _ => "choose set, clear or reopen".to_owned(),
    };
    back_to(&st, back, &msg)
}
