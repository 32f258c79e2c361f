//! The list pages: items with every filter, and the dead letter (failed
//! items), 50 per page with a cursor, with bulk retry and cancel.
//!
//! A row fits one line: the id shortened (the whole id in its link, its
//! title and a copy button), times relative with the absolute time on
//! hover, priority, run at, created, a payload preview (redacted per kind).
//! Paging goes both ways: the next page by the cursor, the previous by the
//! trail of cursors the links carry (the last [`TRAIL_MAX`] pages; past
//! them, back to the first page). The total is shown when it is cheap: a
//! filter of status, lane and kind only, for an unscoped viewer, is summed
//! from the live view's counts (as of its last refresh); any other filter
//! says it is not counted.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use drover::store::ListFilter;
use serde::Deserialize;
use uuid::Uuid;

use super::DashState;
use super::fmt::{When, preview, short, when};
use super::pages::{Nav, nav, render, viewer};
use crate::filter::{self, ItemFilter};

/// Items per page of a list.
const PAGE: u32 = 50;
/// How many earlier pages the previous link can walk back through.
pub(super) const TRAIL_MAX: usize = 30;
/// The characters of a payload preview.
const PREVIEW_CHARS: usize = 60;

/// The list filters as the form sends them.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct ItemsQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    lane: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    after: String,
    #[serde(default)]
    before: String,
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    cursor: String,
    /// The cursors of the pages before this one, oldest first, joined by
    /// `.` (`-` for the first page).
    #[serde(default)]
    trail: String,
    msg: Option<String>,
}

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

fn parse_time(field: &str, s: &str) -> Result<Option<DateTime<Utc>>, String> {
    match non_empty(s) {
        None => Ok(None),
        Some(t) => DateTime::parse_from_rfc3339(&t)
            .map(|d| Some(d.with_timezone(&Utc)))
            .map_err(|e| format!("{field}: {e} (RFC 3339, e.g. 2026-01-01T00:00:00Z)")),
    }
}

/// Why a list's filters were not applied: a filter that does not read (the
/// page says which, 200), or a tenant the session's token is not scoped to
/// (403, as the API answers it).
enum Refusal {
    Invalid(String),
    OtherTenant,
}

impl ItemsQuery {
    fn filter(&self, scoped: Option<Uuid>) -> Result<ListFilter, Refusal> {
        let status = match non_empty(&self.status) {
            None => None,
            Some(s) => Some(
                filter::status(&s)
                    .ok_or_else(|| Refusal::Invalid(format!("status: unknown {s:?}")))?,
            ),
        };
        let asked = match non_empty(&self.tenant) {
            None => None,
            Some(t) => Some(
                t.parse::<Uuid>()
                    .map_err(|e| Refusal::Invalid(format!("tenant: {e}")))?,
            ),
        };
        // A scoped session lists its own tenant; asking for another is
        // refused, never quietly answered with its own items.
        let tenant_id = match (scoped, asked) {
            (Some(own), Some(a)) if a != own => return Err(Refusal::OtherTenant),
            (Some(own), _) => Some(own),
            (None, a) => a,
        };
        self.rest(status, tenant_id).map_err(Refusal::Invalid)
    }

    fn rest(
        &self,
        status: Option<drover::Status>,
        tenant_id: Option<Uuid>,
    ) -> Result<ListFilter, String> {
        let after = match non_empty(&self.cursor) {
            None => None,
            Some(c) => Some(filter::cursor(&c).ok_or("cursor: malformed")?),
        };
        let f = ItemFilter {
            status,
            lane: non_empty(&self.lane),
            kind: non_empty(&self.kind),
            group: non_empty(&self.group),
            key: non_empty(&self.key),
            created_after: parse_time("created after", &self.after)?,
            created_before: parse_time("created before", &self.before)?,
            error: non_empty(&self.error),
            after,
        };
        Ok(f.list_filter(tenant_id, PAGE))
    }

    fn query_string(&self, cursor: Option<&str>) -> String {
        self.query_string_with(cursor, "")
    }

    /// The links to the next and the previous page: the next one carries
    /// this page in its trail; the previous one drops the trail's last.
    fn paging(&self, next: Option<&str>) -> (Option<String>, Option<String>) {
        let mut trail: Vec<&str> = self.trail.split('.').filter(|t| !t.is_empty()).collect();
        let here = if self.cursor.is_empty() {
            "-"
        } else {
            self.cursor.as_str()
        };
        let prev = if self.cursor.is_empty() {
            None
        } else {
            let last = trail.pop().unwrap_or("-");
            let c = if last == "-" { "" } else { last };
            Some(self.query_string_with(Some(c), &trail.join(".")))
        };
        let next = next.map(|c| {
            let mut t: Vec<&str> = self.trail.split('.').filter(|t| !t.is_empty()).collect();
            t.push(here);
            let skip = t.len().saturating_sub(TRAIL_MAX);
            self.query_string_with(Some(c), &t[skip..].join("."))
        });
        (next, prev)
    }

    fn query_string_with(&self, cursor: Option<&str>, trail: &str) -> String {
        let pairs = [
            ("status", self.status.as_str()),
            ("lane", &self.lane),
            ("kind", &self.kind),
            ("group", &self.group),
            ("key", &self.key),
            ("error", &self.error),
            ("after", &self.after),
            ("before", &self.before),
            ("tenant", &self.tenant),
            ("cursor", cursor.unwrap_or("")),
            ("trail", trail),
        ];
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", super::actions::encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// One row of an items list.
pub(super) struct ItemRow {
    id: Uuid,
    short: String,
    tenant: Uuid,
    kind: String,
    lane: String,
    group: String,
    status: String,
    priority: i16,
    run_at: When,
    created: When,
    updated: When,
    /// Claims so far.
    runs: i64,
    /// Failed attempts.
    failures: i32,
    error: String,
    payload: String,
}

/// The filter form's values, as typed.
pub(super) struct FilterView {
    lane: String,
    kind: String,
    group: String,
    key: String,
    error: String,
    after: String,
    before: String,
    tenant: String,
}

#[derive(Template)]
#[template(path = "dashboard/items.html")]
struct ItemsPage {
    nav: Nav,
    page: &'static str,
    statuses: Vec<(String, bool)>,
    f: FilterView,
    show_tenant: bool,
    can_operate: bool,
    back: String,
    rows: Vec<ItemRow>,
    next: Option<String>,
    prev: Option<String>,
    /// Not the first page: a link back to it.
    first: Option<String>,
    /// The total matching, or why it is not counted.
    total: String,
    /// The dead letter's groups (the dead-letter page only).
    groups: Vec<super::dead::GroupRow>,
    /// Says when the groups are read from the newest dead letters only.
    groups_note: Option<String>,
}

async fn list_page(
    st: DashState,
    headers: HeaderMap,
    mut q: ItemsQuery,
    title: &'static str,
    page: &'static str,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if page == "dead" {
        q.status = "failed".into();
    }
    let scoped = v.session.principal.tenant;
    let mut msg = q.msg.clone();
    let mut rows = Vec::new();
    let mut next = None;
    let mut prev = None;
    let mut status = StatusCode::OK;
    let mut total = String::new();
    let mut groups = Vec::new();
    let mut groups_note = None;
    match q.filter(scoped) {
        Err(Refusal::Invalid(e)) => msg = Some(e),
        Err(Refusal::OtherTenant) => {
            status = StatusCode::FORBIDDEN;
            msg = Some("tenant: the token is scoped to another tenant".into());
        }
        Ok(filter) => match st.app.queue.list(&filter).await {
            Err(e) => msg = Some(e.to_string()),
            Ok(items) => {
                total = total_of(&st, &q, scoped).await;
                if page == "dead" {
                    match super::dead::read_groups(&st, &filter).await {
                        Ok((g, note)) => (groups, groups_note) = (g, note),
                        Err(e) => groups_note = Some(format!("groups not read: {e}")),
                    }
                }
                let cursor = (items.len() == PAGE as usize)
                    .then(|| items.last())
                    .flatten()
                    .map(|last| filter::cursor_text(last.created_at, last.id));
                let (n, p) = q.paging(cursor.as_deref());
                let base = st.config.base();
                next = n.map(|qs| format!("{base}/{page}?{qs}"));
                prev = p.map(|qs| format!("{base}/{page}?{qs}"));
                let now = Utc::now();
                rows = items
                    .into_iter()
                    .map(|i| ItemRow {
                        short: short(i.id),
                        id: i.id,
                        tenant: i.tenant_id,
                        payload: preview(&st.config.redacted(&i.kind, &i.payload), PREVIEW_CHARS),
                        kind: i.kind,
                        lane: i.lane,
                        group: i.group.unwrap_or_default(),
                        status: i.status.as_str().to_owned(),
                        priority: i.priority,
                        run_at: when(i.available_at, now),
                        created: when(i.created_at, now),
                        updated: when(i.updated_at, now),
                        runs: i.claim_seq,
                        failures: i.attempts,
                        error: i.last_error.unwrap_or_default(),
                    })
                    .collect();
            }
        },
    }
    let mut statuses = vec![(String::new(), q.status.is_empty())];
    for s in ["pending", "claimed", "done", "failed", "cancelled"] {
        statuses.push((s.to_owned(), q.status == s));
    }
    let back = format!("{}/{page}?{}", st.config.base(), q.query_string(None));
    let t = ItemsPage {
        nav: nav(&st, &v, title, msg),
        page,
        statuses,
        f: FilterView {
            lane: q.lane.clone(),
            kind: q.kind.clone(),
            group: q.group.clone(),
            key: q.key.clone(),
            error: q.error.clone(),
            after: q.after.clone(),
            before: q.before.clone(),
            tenant: q.tenant.clone(),
        },
        show_tenant: scoped.is_none(),
        can_operate: v.can_operate(),
        rows,
        next,
        first: (!q.cursor.is_empty()).then(|| back.clone()),
        back,
        prev,
        total,
        groups,
        groups_note,
    };
    render(&t, status)
}

/// The total a list's filter matches when it is cheap, in words: summed
/// from the live view's counts (per lane, kind and status, refreshed every
/// interval) for an unscoped viewer filtering by status, lane and kind
/// only; otherwise why it is not counted.
async fn total_of(st: &DashState, q: &ItemsQuery, scoped: Option<Uuid>) -> String {
    if scoped.is_some() || non_empty(&q.tenant).is_some() {
        return "total not counted for one tenant".into();
    }
    let narrowed = [&q.group, &q.key, &q.error, &q.after, &q.before]
        .iter()
        .any(|f| non_empty(f).is_some());
    if narrowed {
        return "total not counted for a group, key, error or time filter".into();
    }
    let snap = st.live.latest().await;
    let (lane, kind) = (non_empty(&q.lane), non_empty(&q.kind));
    let status = non_empty(&q.status).and_then(|s| filter::status(&s));
    let n: i64 = snap
        .counts
        .iter()
        .filter(|r| lane.as_deref().is_none_or(|l| l == r.lane))
        .filter(|r| kind.as_deref().is_none_or(|k| k == r.kind))
        .filter(|r| status.is_none_or(|s| s == r.status))
        .map(|r| r.count)
        .sum();
    format!(
        "of {n} in all (counted {})",
        super::fmt::relative(snap.at, Utc::now())
    )
}

/// Items, with every list filter.
pub(super) async fn items(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<ItemsQuery>,
) -> Response {
    list_page(st, headers, q, "Items", "items").await
}

/// The dead letter: failed items, with bulk retry and cancel.
pub(super) async fn dead(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<ItemsQuery>,
) -> Response {
    list_page(st, headers, q, "Dead letter", "dead").await
}
