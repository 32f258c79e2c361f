//! The list pages: items with every filter, and the dead letter (failed
//! items), 50 per page with a cursor, with bulk retry and cancel.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use drover::store::ListFilter;
use serde::Deserialize;
use uuid::Uuid;

use super::DashState;
use super::pages::{Nav, nav, render, time, viewer};
use crate::filter::{self, ItemFilter};

/// Items per page of a list.
const PAGE: u32 = 50;

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
    tenant: Uuid,
    kind: String,
    lane: String,
    group: String,
    status: String,
    attempts: i32,
    updated: String,
    error: String,
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
    let mut status = StatusCode::OK;
    match q.filter(scoped) {
        Err(Refusal::Invalid(e)) => msg = Some(e),
        Err(Refusal::OtherTenant) => {
            status = StatusCode::FORBIDDEN;
            msg = Some("tenant: the token is scoped to another tenant".into());
        }
        Ok(filter) => match st.app.queue.list(&filter).await {
            Err(e) => msg = Some(e.to_string()),
            Ok(items) => {
                if items.len() == PAGE as usize
                    && let Some(last) = items.last()
                {
                    let c = filter::cursor_text(last.created_at, last.id);
                    next = Some(format!(
                        "{}/{page}?{}",
                        st.config.base(),
                        q.query_string(Some(&c))
                    ));
                }
                rows = items
                    .into_iter()
                    .map(|i| ItemRow {
                        id: i.id,
                        tenant: i.tenant_id,
                        kind: i.kind,
                        lane: i.lane,
                        group: i.group.unwrap_or_default(),
                        status: i.status.as_str().to_owned(),
                        attempts: i.attempts,
                        updated: time(i.updated_at),
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
        back,
        rows,
        next,
    };
    render(&t, status)
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
