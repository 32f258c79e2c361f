//! The item page: the item, its runs (the attempt history), why it waits,
//! its audit trail with actors by name, and the actions its status allows.
//!
//! Invariants: a tenant-scoped viewer reaches only its tenant's items (the
//! path's tenant is checked against the token, as the API checks it);
//! Cancel is offered only while the item is not final (Discard for a dead
//! letter), Retry only once it is.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use drover::Status;
use drover::store::runs::ItemRun;
use uuid::Uuid;

use super::DashState;
use super::fmt::{When, duration, when};
use super::pages::{MsgQuery, Nav, nav, note_page, render, viewer};
use crate::actors::Actors;

/// One item as the detail page shows it.
pub(super) struct ItemView {
    id: Uuid,
    tenant: Uuid,
    status: String,
    kind: String,
    lane: String,
    group: String,
    priority: i16,
    /// Claims so far: every run, the one in flight included.
    runs: i64,
    /// Failed attempts (lease expiries included) against the budget.
    failures: i32,
    max_attempts: i32,
    worker: String,
    lease: Option<When>,
    available: When,
    created: When,
    created_by: String,
    updated: When,
    updated_by: String,
    key: String,
    request: String,
    error: String,
    payload: String,
    /// The last progress report, in words (`-` when none).
    progress: String,
    /// The handler's result, pretty JSON (empty when none), redacted as
    /// the payload is.
    result: String,
}

/// A progress report in words: `40 %, {"cursor":7}`, either half alone.
fn progress_words(p: Option<&drover::item::Progress>) -> String {
    match p.map(|p| (p.value, &p.data)) {
        Some((Some(v), Some(d))) => format!("{v} %, {d}"),
        Some((Some(v), None)) => format!("{v} %"),
        Some((None, Some(d))) => d.to_string(),
        _ => "-".into(),
    }
}

/// One run as the page shows it.
pub(super) struct RunRow {
    seq: i64,
    worker: String,
    started: When,
    finished: Option<When>,
    took: String,
    outcome: String,
    error: String,
}

/// One audit entry, its actor by name.
pub(super) struct AuditRow {
    at: When,
    action: String,
    actor: String,
    detail: String,
}

/// An item's links as the page shows them: each other item as (href,
/// short id).
pub(super) struct LinksView {
    after: Vec<(String, String)>,
    waiting_on: i64,
    policy: String,
    dependants: Vec<(String, String)>,
    batch: Option<String>,
}

impl LinksView {
    /// `None` for an item with no dependencies, no dependants and no batch.
    fn of(st: &DashState, tenant: Uuid, l: drover::store::links::ItemLinks) -> Option<LinksView> {
        if l.after.is_empty() && l.dependants.is_empty() && l.batch.is_none() {
            return None;
        }
        let base = st.config.base();
        let link = |id: Uuid| (format!("{base}/items/{tenant}/{id}"), super::fmt::short(id));
        Some(LinksView {
            after: l.after.iter().copied().map(link).collect(),
            waiting_on: l.waiting_on,
            policy: l.after_policy.map(|p| p.to_string()).unwrap_or_default(),
            dependants: l.dependants.iter().copied().map(link).collect(),
            batch: l.batch.map(|b| b.to_string()),
        })
    }
}

#[derive(Template)]
#[template(path = "dashboard/item.html")]
struct ItemPage {
    nav: Nav,
    i: ItemView,
    /// Dependencies, dependants and batch (`None`: it has none).
    links: Option<LinksView>,
    runs: Vec<RunRow>,
    audit: Vec<AuditRow>,
    /// While pending: why it has not started, in words.
    waiting: Vec<String>,
    pending: bool,
    can_operate: bool,
    can_cancel: bool,
    can_retry: bool,
    dead: bool,
    back: String,
}

fn unavailable(st: &DashState, v: &super::pages::Viewer, e: drover::Error) -> Response {
    note_page(
        st,
        v,
        "Items",
        e.to_string(),
        StatusCode::SERVICE_UNAVAILABLE,
    )
}

/// The runs as the page lists them, newest first: the claim in flight (a
/// claimed row's updated_at is its claim's start) above the ended ones.
fn run_rows(item: &drover::Item, runs: Vec<ItemRun>, now: DateTime<Utc>) -> Vec<RunRow> {
    let mut rows = Vec::with_capacity(runs.len() + 1);
    if item.status == Status::Claimed {
        // The run in flight: a claimed row's updated_at is its claim's start.
        rows.push(RunRow {
            seq: item.claim_seq,
            worker: item.claimed_by.clone().unwrap_or_default(),
            started: when(item.updated_at, now),
            finished: None,
            took: duration(now - item.updated_at),
            outcome: "running".into(),
            error: String::new(),
        });
    }
    rows.extend(runs.into_iter().map(|r| RunRow {
        seq: r.claim_seq,
        worker: r.worker.clone().unwrap_or_default(),
        started: when(r.started_at, now),
        finished: Some(when(r.finished_at, now)),
        took: duration(r.duration()),
        outcome: r.outcome.as_str().replace('_', " "),
        error: r.error.unwrap_or_default(),
    }));
    rows
}

/// One item: payload (redacted per kind), runs and failures, its runs,
/// worker, times, error, why it waits, audit.
pub(super) async fn item(
    State(st): State<DashState>,
    headers: HeaderMap,
    Path((tenant, id)): Path<(Uuid, Uuid)>,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let not_found = |v: &super::pages::Viewer| {
        note_page(
            &st,
            v,
            "Items",
            format!("no item {id}"),
            StatusCode::NOT_FOUND,
        )
    };
    let Ok(tenant) = v.session.principal.tenant_for(Some(tenant)) else {
        return not_found(&v);
    };
    let item = match st.app.queue.get(tenant, id).await {
        Ok(i) => i,
        Err(e) if e.kind() == drover::ErrorKind::NotFound => return not_found(&v),
        Err(e) => return unavailable(&st, &v, e),
    };
    let (audit, runs, links) = match (
        st.app.queue.audit(tenant, id).await,
        st.app.queue.runs(tenant, id).await,
        st.app.queue.links(tenant, id).await,
    ) {
        (Ok(a), Ok(r), Ok(l)) => (a, r, LinksView::of(&st, tenant, l)),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return unavailable(&st, &v, e),
    };
    let pending = item.status == Status::Pending;
    let actors = Actors::load(&st.app.queue).await;
    let waiting = if pending {
        match st.app.queue.why_waiting(&item).await {
            Ok(w) => w
                .into_iter()
                .map(|w| waiting_line(w.for_tenant(v.session.principal.tenant), &actors))
                .collect(),
            Err(e) => vec![format!("not known now: {e}")],
        }
    } else {
        Vec::new()
    };
    let now = Utc::now();
    let rows = run_rows(&item, runs, now);
    let payload = st.config.redacted(&item.kind, &item.payload);
    let i = ItemView {
        id: item.id,
        tenant: item.tenant_id,
        status: item.status.as_str().to_owned(),
        kind: item.kind.clone(),
        lane: item.lane.clone(),
        group: item.group.clone().unwrap_or_default(),
        priority: item.priority,
        runs: item.claim_seq,
        failures: item.attempts,
        max_attempts: item.max_attempts,
        worker: item.claimed_by.clone().unwrap_or_else(|| "-".into()),
        lease: item.lease_expires_at.map(|t| when(t, now)),
        available: when(item.available_at, now),
        created: when(item.created_at, now),
        created_by: actors.name(item.created_by),
        updated: when(item.updated_at, now),
        updated_by: actors.name(item.updated_by),
        key: item.idempotency_key.clone().unwrap_or_else(|| "-".into()),
        request: item.request_id.clone().unwrap_or_else(|| "-".into()),
        error: item.last_error.clone().unwrap_or_default(),
        payload: serde_json::to_string_pretty(&payload).unwrap_or_default(),
        progress: progress_words(item.progress.as_ref()),
        result: item
            .result
            .as_ref()
            .map(|r| serde_json::to_string_pretty(&st.config.redacted(&item.kind, r)))
            .transpose()
            .unwrap_or_default()
            .unwrap_or_default(),
    };
    let back = format!("{}/items/{}/{}", st.config.base(), item.tenant_id, item.id);
    let audit = audit
        .into_iter()
        .map(|a| AuditRow {
            at: when(a.at, now),
            action: a.action,
            actor: actors.name(a.actor),
            detail: a.detail.unwrap_or_default(),
        })
        .collect();
    render(
        &ItemPage {
            nav: nav(&st, &v, "Items", q.msg),
            i,
            links,
            runs: rows,
            audit,
            waiting,
            pending,
            can_operate: v.can_operate(),
            // The store cancels pending, claimed and dead-lettered items
            // (a dead letter is discarded); retries only final ones.
            can_cancel: matches!(
                item.status,
                Status::Pending | Status::Claimed | Status::Failed
            ),
            can_retry: item.status.is_final(),
            dead: item.status == Status::Failed,
            back,
        },
        StatusCode::OK,
    )
}

/// One reason as the page says it: the queue's sentence, and for a paused
/// lane who paused it, by name (the sentence itself cannot look names up).
fn waiting_line(w: drover::queue::WaitReason, actors: &Actors) -> String {
    match &w {
        drover::queue::WaitReason::LanePaused { by, .. } => {
            format!("{w} by {}", actors.name(*by))
        }
        _ => w.to_string(),
    }
}
