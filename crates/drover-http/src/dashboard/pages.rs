//! The dashboard's pages (GET): each reads, none writes. Views are built
//! into plain strings here so the templates only lay them out (escaped).

use std::collections::BTreeSet;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use drover::lane::LaneState;
use serde::Deserialize;
use uuid::Uuid;

use super::DashState;
use super::limits::{LimitRow, split};
use super::live::Snapshot;
use super::session::{Session, cookie_id};
use crate::actors::Actors;
use crate::auth::Role;

const LINKS: [(&str, &str); 8] = [
    ("Overview", "/"),
    ("Items", "/items"),
    ("Dead letter", "/dead"),
    ("Lanes", "/lanes"),
    ("Workers", "/workers"),
    ("Schedules", "/schedules"),
    ("Orchestrations", "/orchestrations"),
    ("Batches", "/batches"),
];

/// The pages that span every tenant (lanes with their limits, workers with
/// their hosts, schedules): not linked for a tenant-scoped session.
const INSTALLATION_ONLY: [&str; 3] = ["Lanes", "Workers", "Schedules"];

/// The header every page shares.
pub(super) struct Nav {
    pub title: &'static str,
    pub base: String,
    pub csrf: String,
    pub who: String,
    pub links: Vec<(&'static str, &'static str, bool)>,
    pub msg: Option<String>,
}

/// A request's session, with its id.
pub(super) struct Viewer {
    pub id: String,
    pub session: Session,
}

impl Viewer {
    pub fn can_operate(&self) -> bool {
        self.session.principal.has(Role::Operator)
    }
}

/// The request's session; without one, the answer to give (a redirect to
/// the login form).
///
/// The session's token is asked for again on every request: a revoked
/// token ends the session here (removed, and the browser sent to the login
/// form), so nothing a revoked token started keeps reading or writing; a
/// token whose grants changed carries its new grants from this request on.
/// A token table that cannot answer refuses the request (503) rather than
/// trusting the session.
pub(super) async fn viewer(st: &DashState, headers: &HeaderMap) -> Result<Viewer, Box<Response>> {
    let to_login =
        || Box::new(Redirect::to(&format!("{}/login", st.config.base())).into_response());
    let Some((id, mut session)) =
        cookie_id(headers).and_then(|id| st.sessions.get(&id).map(|session| (id, session)))
    else {
        return Err(to_login());
    };
    match st.app.auth.authenticate_hash(&session.token).await {
        Ok(Some(now)) => {
            if now != session.principal {
                st.sessions.refresh(&id, &now);
                session.principal = now;
            }
            Ok(Viewer { id, session })
        }
        Ok(None) => {
            tracing::info!(token = %session.principal.token_id,
                "dashboard session ended: its token is revoked");
            st.sessions.remove(&id);
            Err(to_login())
        }
        Err(e) => {
            tracing::warn!(error = %e, "dashboard request could not check its session's token");
            Err(Box::new(
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the token store is unavailable",
                )
                    .into_response(),
            ))
        }
    }
}

pub(super) fn nav(st: &DashState, v: &Viewer, title: &'static str, msg: Option<String>) -> Nav {
    let p = &v.session.principal;
    Nav {
        title,
        base: st.config.base(),
        csrf: v.session.csrf.clone(),
        who: match p.tenant {
            Some(t) => format!("{} · tenant {t}", p.role.as_str()),
            None => p.role.as_str().to_owned(),
        },
        // A tenant's session is not offered the installation-wide pages
        // (their URLs still answer it with the scoped note, or 403).
        links: LINKS
            .iter()
            .filter(|(n, _)| p.tenant.is_none() || !INSTALLATION_ONLY.contains(n))
            .map(|(n, h)| (*n, *h, *n == title))
            .collect(),
        msg: msg.filter(|m| !m.is_empty()),
    }
}

/// Renders a template; a rendering failure is a 500 that is logged.
pub(super) fn render<T: Template>(t: &T, status: StatusCode) -> Response {
    match t.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a dashboard template failed to render");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

pub(super) fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn opt_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), time)
}

pub(super) fn age(secs: f64) -> String {
    if secs <= 0.0 {
        return "-".to_owned();
    }
    let s = secs as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct MsgQuery {
    pub(super) msg: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/login.html")]
pub(super) struct LoginPage {
    pub base: String,
    pub error: Option<String>,
}

/// The login form. Answered with 401: it is what an unauthenticated
/// browser gets, and no route answers 2xx without credentials.
pub(super) async fn login_form(State(st): State<DashState>) -> Response {
    render(
        &LoginPage {
            base: st.config.base(),
            error: None,
        },
        StatusCode::UNAUTHORIZED,
    )
}

/// One lane as the lanes page shows it.
pub(super) struct LaneView {
    lane: String,
    paused: bool,
    pending: i64,
    claimed: i64,
    failed: i64,
    oldest: String,
    since: String,
    /// Who paused or resumed it last (`-` when no one has).
    by: String,
}

/// The lanes of the snapshot, of `states` and of `limited` (lanes a limit
/// names), each with its counts.
fn lane_views(
    snap: &Snapshot,
    states: &[LaneState],
    limited: &[String],
    actors: &Actors,
) -> Vec<LaneView> {
    let per = snap.per_lane();
    let mut names: BTreeSet<String> = per.keys().cloned().collect();
    names.extend(limited.iter().cloned());
    names.extend(snap.paused.iter().cloned());
    names.extend(states.iter().map(|s| s.lane.clone()));
    names.extend(snap.workers.iter().flat_map(|w| w.lanes.iter().cloned()));
    names
        .into_iter()
        .map(|lane| {
            let c = per.get(&lane).copied().unwrap_or_default();
            let oldest = snap
                .gauges
                .oldest_age_seconds
                .iter()
                .find(|(l, _)| *l == lane)
                .map_or(0.0, |(_, a)| *a);
            let state = states.iter().find(|s| s.lane == lane);
            LaneView {
                paused: state.map_or_else(|| snap.paused.contains(&lane), |s| s.paused),
                since: state.map_or_else(|| "-".to_owned(), |s| time(s.changed_at)),
                by: state.map_or_else(|| "-".to_owned(), |s| actors.name(s.changed_by)),
                pending: c[0],
                claimed: c[1],
                failed: c[3],
                oldest: age(oldest),
                lane,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "dashboard/scoped.html")]
pub(super) struct ScopedPage {
    pub nav: Nav,
    pub tenant: Uuid,
}

#[derive(Template)]
#[template(path = "dashboard/table.html")]
pub(super) struct TablePage {
    pub(super) nav: Nav,
    pub(super) note: Option<String>,
    pub(super) header: Vec<&'static str>,
    pub(super) rows: Vec<Vec<String>>,
}

pub(super) fn note_page(
    st: &DashState,
    v: &Viewer,
    title: &'static str,
    note: String,
    status: StatusCode,
) -> Response {
    render(
        &TablePage {
            nav: nav(st, v, title, None),
            note: Some(note),
            header: vec![],
            rows: vec![],
        },
        status,
    )
}

#[derive(Template)]
#[template(path = "dashboard/lanes.html")]
struct LanesPage {
    nav: Nav,
    /// Each lane with its limit, if one is in force.
    lanes: Vec<(LaneView, Option<LimitRow>)>,
    /// The kind and per-group limits in force.
    limits: Vec<LimitRow>,
    /// The kinds and groups closed until a time.
    closures: Vec<ClosureRow>,
    /// The rate limits in force.
    rates: Vec<RateRow>,
    /// Each tenant's fair share of each lane.
    shares: Vec<ShareRow>,
    can_operate: bool,
    at: String,
}

/// A closure as the lanes page shows it (`group` empty: the whole kind).
struct ClosureRow {
    kind: String,
    group: String,
    tenant: String,
    until: String,
    by: String,
}

impl ClosureRow {
    /// `c` with its closer named: the item whose handler closed it, else
    /// the actor (a token's label, or `system`).
    fn of(c: drover::store::closures::Closure, actors: &Actors) -> Self {
        ClosureRow {
            by: c
                .closed_by_item
                .map_or_else(|| actors.name(c.closed_by), |i| format!("item {i}")),
            kind: c.kind,
            group: c.group.unwrap_or_default(),
            tenant: c.tenant_id.to_string(),
            until: time(c.until),
        }
    }
}

/// A tenant's fair share of a lane as the lanes page shows it.
struct ShareRow {
    lane: String,
    tenant: String,
    weight: u32,
    /// Due items, or "1000+" at the count's cap.
    waiting: String,
    started: u64,
    /// `by tenant` (the default), `by group` for a lane an operator set to
    /// share each tenant's starts between its groups, or `off` for one
    /// taken off fair share.
    fair: &'static str,
}

/// A rate limit in force as the lanes page shows it.
struct RateRow {
    /// `kind call per group`, `lane exports`.
    scope: String,
    /// Starts per period (`10/1s`).
    rate: String,
    burst: u32,
    /// When the next start is allowed; `now` when one is.
    next_start: String,
    /// For a per-group rate: how many groups it holds back now.
    held_back: u64,
    source: &'static str,
    /// Who set it: a token's label, or `system` for the code's.
    by: String,
}

impl RateRow {
    /// `u` as the page shows it, its setter named.
    fn of(u: drover::store::rates::RateUsage, actors: &Actors) -> Self {
        let r = u.setting.rate;
        RateRow {
            by: actors.name(u.setting.set_by),
            scope: u.setting.scope.to_string(),
            rate: r.with_burst(1).to_string(),
            burst: r.burst,
            next_start: u.next_start_at.map_or_else(|| "now".to_owned(), time),
            held_back: u.held_back,
            source: u.setting.source.as_str(),
        }
    }
}

/// Each tenant's fair share of each lane as the lanes page shows it. The
/// shares are the live view's, at most one interval old (their count of
/// due items is most of the page's reads); the settings are read now, so
/// a lane turned off shows at once.
async fn share_rows(st: &DashState) -> drover::Result<Vec<ShareRow>> {
    let shares = st.live.fair_shares().await?;
    let settings = st.app.queue.fair_settings().await?;
    Ok(shares
        .iter()
        .map(|s| ShareRow {
            fair: settings.mode(&s.lane),
            lane: s.lane.clone(),
            tenant: s.tenant.to_string(),
            weight: s.weight,
            waiting: if s.waiting >= drover::store::fairness::FAIR_WAITING_CAP {
                format!("{}+", s.waiting)
            } else {
                s.waiting.to_string()
            },
            started: s.started,
        })
        .collect())
}

/// Lanes with their counts, state and limit, and pause/resume; the kind
/// and per-group limits; an operator's form to set and clear a limit.
pub(super) async fn lanes(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Some(tenant) = v.session.principal.tenant {
        return render(
            &ScopedPage {
                nav: nav(&st, &v, "Lanes", q.msg),
                tenant,
            },
            StatusCode::OK,
        );
    }
    let snap = st.live.latest().await;
    let actors = Actors::load(&st.app.queue).await;
    // The states themselves are read now, so a pause shows at once.
    let states = match st.app.queue.lane_list().await {
        Ok(s) => s,
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Lanes",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let (mut by_lane, limits) = match st.app.queue.limits().await {
        Ok(u) => split(u, &actors),
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Lanes",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let closures = match st.app.queue.closures().await {
        Ok(c) => c.into_iter().map(|c| ClosureRow::of(c, &actors)).collect(),
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Lanes",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let rates = match st.app.queue.rates().await {
        Ok(r) => r.into_iter().map(|r| RateRow::of(r, &actors)).collect(),
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Lanes",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let shares = match share_rows(&st).await {
        Ok(rows) => rows,
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Lanes",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let limited: Vec<String> = by_lane.keys().cloned().collect();
    let lanes = lane_views(&snap, &states, &limited, &actors)
        .into_iter()
        .map(|l| {
            let limit = by_lane.remove(&l.lane);
            (l, limit)
        })
        .collect();
    render(
        &LanesPage {
            nav: nav(&st, &v, "Lanes", q.msg),
            lanes,
            limits,
            closures,
            rates,
            shares,
            can_operate: v.can_operate(),
            at: time(snap.at),
        },
        StatusCode::OK,
    )
}

/// For a session of a tenant-scoped token, the answer to an
/// installation-wide page (workers, schedules): refused (403) with a
/// pointer to its items, as the API refuses the token the same data.
pub(super) fn installation_only(
    st: &DashState,
    v: &Viewer,
    title: &'static str,
) -> Option<Response> {
    let tenant = v.session.principal.tenant?;
    Some(render(
        &ScopedPage {
            nav: nav(st, v, title, None),
            tenant,
        },
        StatusCode::FORBIDDEN,
    ))
}
