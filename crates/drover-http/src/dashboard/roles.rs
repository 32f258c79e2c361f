//! The role pages (GET): workers with what each runs now, schedules with
//! their next runs, orchestrations with a detail page.
//!
//! Queries these pages add, each cheap at any table size:
//! - workers: the workers table (one row per process) and the claimed
//!   items (`items_running`: the partial index of claimed rows, as many
//!   entries as items run now, at most `RUNNING_MAX`);
//! - schedules: the schedule state table (one row per schedule); the next
//!   runs are computed from each row's cron and zone, not read;
//! - orchestrations: the list by id (`orchestration_list`, newest 100),
//!   one record by primary key, and its signals (`orchestration_signals`,
//!   the index on the orchestration's id).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;
use drover::orchestration::OrchestrationStatus;
use uuid::Uuid;

use super::DashState;
use super::pages::{
    MsgQuery, Nav, Viewer, age, installation_only, nav, note_page, opt_time, render, time, viewer,
};

/// A relative and absolute time, as every role page shows one.
fn when(t: chrono::DateTime<Utc>) -> String {
    let secs = (Utc::now() - t).num_milliseconds() as f64 / 1000.0;
    if secs >= 1.0 {
        format!("{} ago ({})", age(secs), time(t))
    } else {
        time(t)
    }
}

/// One worker as the workers page shows it.
struct WorkerView {
    id: String,
    state: String,
    host: String,
    pid: i32,
    version: String,
    lanes: String,
    kinds: String,
    capacity: i32,
    in_flight: usize,
    last_beat: String,
    started: String,
}

/// One running item.
struct RunView {
    worker: String,
    kind: String,
    lane: String,
    tenant: Uuid,
    id: Uuid,
    since: String,
}

#[derive(Template)]
#[template(path = "dashboard/workers.html")]
struct WorkersPage {
    nav: Nav,
    workers: Vec<WorkerView>,
    runs: Vec<RunView>,
    capped: bool,
}

/// Workers: state, host, version, lanes, kinds, capacity against in
/// flight, last beat; and what each runs now (unscoped tokens).
pub(super) async fn workers(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Some(r) = installation_only(&st, &v, "Workers") {
        return r;
    }
    // The live view's workers and running items, at most one interval
    // old: the running items are up to a thousand rows, and eight viewers
    // reading them on every view were most of the page's time at
    // 10,000,000 items (docs/performance.md). A failed refresh shows the
    // last data read; with none to show, the error.
    let snap = st.live.latest().await;
    if snap.workers.is_empty()
        && let Some(e) = &snap.error
    {
        return note_page(
            &st,
            &v,
            "Workers",
            e.clone(),
            StatusCode::SERVICE_UNAVAILABLE,
        );
    }
    let (rows, running) = (snap.workers.clone(), &snap.running);
    let capped = running.len() >= drover::store::throughput::RUNNING_MAX as usize;
    let workers = rows
        .into_iter()
        .map(|w| WorkerView {
            in_flight: running.iter().filter(|r| r.worker == w.id).count(),
            state: w.state,
            host: w.host,
            pid: w.pid,
            version: if w.version.is_empty() {
                "-".to_owned()
            } else {
                w.version
            },
            lanes: w.lanes.join(", "),
            kinds: if w.kinds.is_empty() {
                "(not recorded)".to_owned()
            } else {
                w.kinds.join(", ")
            },
            capacity: w.capacity,
            last_beat: when(w.last_beat_at),
            started: time(w.started_at),
            id: w.id,
        })
        .collect();
    let runs = running
        .iter()
        .map(|r| RunView {
            worker: r.worker.clone(),
            kind: r.kind.clone(),
            lane: r.lane.clone(),
            tenant: r.tenant_id,
            id: r.id,
            since: when(r.since),
        })
        .collect();
    render(
        &WorkersPage {
            nav: nav(&st, &v, "Workers", q.msg),
            workers,
            runs,
            capped,
        },
        StatusCode::OK,
    )
}

/// One schedule as the schedules page shows it.
struct ScheduleView {
    name: String,
    cron: String,
    zone: String,
    kind: String,
    lane: String,
    misfire: String,
    last_tick: String,
    next: Vec<String>,
    seen: String,
    /// This server declares it, so it can trigger it.
    here: bool,
}

#[derive(Template)]
#[template(path = "dashboard/schedules.html")]
struct SchedulesPage {
    nav: Nav,
    rows: Vec<ScheduleView>,
    can_operate: bool,
}

/// Schedules: declaration, last tick, the next three runs, and "trigger
/// now" for the ones this server declares (unscoped tokens).
pub(super) async fn schedules(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Some(r) = installation_only(&st, &v, "Schedules") {
        return r;
    }
    let rows = match st.app.queue.schedule_list().await {
        Ok(r) => r,
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Schedules",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let now = Utc::now();
    let rows = rows
        .into_iter()
        .map(|r| ScheduleView {
            next: drover::periodic::next_ticks_of(&r.decl.cron, &r.decl.zone, now, 3).map_or_else(
                || vec!["(does not parse)".to_owned()],
                |ts| ts.into_iter().map(time).collect(),
            ),
            here: st.config.schedules.declares(&r.decl.name),
            name: r.decl.name,
            cron: r.decl.cron,
            zone: r.decl.zone,
            kind: r.decl.kind,
            lane: r.decl.lane,
            misfire: r.decl.misfire.name().to_owned(),
            last_tick: opt_time(r.last_tick),
            seen: when(r.seen_at),
        })
        .collect();
    render(
        &SchedulesPage {
            nav: nav(&st, &v, "Schedules", q.msg),
            rows,
            can_operate: v.can_operate(),
        },
        StatusCode::OK,
    )
}

/// One orchestration in the list.
struct OrchRow {
    id: Uuid,
    tenant: Uuid,
    kind: String,
    status: String,
    step: String,
    waiting_for: String,
    updated: String,
    error: String,
}

#[derive(Template)]
#[template(path = "dashboard/orchestrations.html")]
struct OrchestrationsPage {
    nav: Nav,
    rows: Vec<OrchRow>,
    stuck: usize,
    show_tenant: bool,
}

/// Orchestrations: the newest, each a link to its detail; stuck ones
/// highlighted.
pub(super) async fn orchestrations(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let filter = drover::orchestration::OrchestrationFilter {
        tenant_id: v.session.principal.tenant,
        limit: 100,
        ..Default::default()
    };
    let rows = match st.app.queue.orchestrations(&filter).await {
        Ok(r) => r,
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Orchestrations",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let rows: Vec<OrchRow> = rows
        .into_iter()
        .map(|o| OrchRow {
            id: o.id,
            tenant: o.tenant_id,
            kind: o.kind,
            status: o.status.as_str().to_owned(),
            step: o.step,
            waiting_for: o.waiting_for.unwrap_or_default(),
            updated: when(o.updated_at),
            error: o.error.unwrap_or_default(),
        })
        .collect();
    render(
        &OrchestrationsPage {
            nav: nav(&st, &v, "Orchestrations", q.msg),
            stuck: rows.iter().filter(|r| r.status == "stuck").count(),
            rows,
            show_tenant: v.session.principal.tenant.is_none(),
        },
        StatusCode::OK,
    )
}

/// One history entry.
struct StepView {
    step: String,
    attempt: i32,
    started: String,
    ended: String,
    took: String,
    outcome: String,
}

/// One signal.
struct SignalView {
    name: String,
    sent: String,
    consumed: String,
    key: String,
    payload: String,
}

#[derive(Template)]
#[template(path = "dashboard/orchestration.html")]
struct OrchestrationPage {
    nav: Nav,
    o: drover::orchestration::Orchestration,
    status: String,
    created: String,
    updated: String,
    parked_until: String,
    history: Vec<StepView>,
    signals: Vec<SignalView>,
    /// The compensation: the completed steps, newest first (the order
    /// compensation undoes them), with where it stands.
    compensation: Vec<(String, &'static str)>,
    state: String,
    result: String,
    can_operate: bool,
    can_cancel: bool,
    can_resume: bool,
    can_signal: bool,
    back: String,
}

fn compensation(o: &drover::orchestration::Orchestration) -> Vec<(String, &'static str)> {
    let undoing = matches!(
        o.status,
        OrchestrationStatus::Compensating
            | OrchestrationStatus::Compensated
            | OrchestrationStatus::CompensationFailed
            | OrchestrationStatus::Cancelled
    ) || (o.status == OrchestrationStatus::Stuck
        && o.resume_as == Some(OrchestrationStatus::Compensating));
    if !undoing {
        return Vec::new();
    }
    // `completed` still holds the steps not undone yet; the step being
    // compensated is `step`.
    let mut out: Vec<(String, &'static str)> = o
        .completed
        .iter()
        .rev()
        .map(|s| {
            let at = if *s == o.step && o.status == OrchestrationStatus::Compensating {
                "compensating now"
            } else if o.status == OrchestrationStatus::CompensationFailed && *s == o.step {
                "compensation failed"
            } else {
                "to undo"
            };
            (s.clone(), at)
        })
        .collect();
    if matches!(
        o.status,
        OrchestrationStatus::Compensated | OrchestrationStatus::Cancelled
    ) && out.is_empty()
    {
        out.push(("every completed step".to_owned(), "undone"));
    }
    out
}

/// One orchestration: state, current step, history, parks and signals,
/// compensation; cancel, resume and signal for operators.
pub(super) async fn orchestration(
    State(st): State<DashState>,
    headers: HeaderMap,
    Path((tenant, id)): Path<(Uuid, Uuid)>,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let missing = |v: &Viewer| {
        note_page(
            &st,
            v,
            "Orchestrations",
            format!("no orchestration {id}"),
            StatusCode::NOT_FOUND,
        )
    };
    let Ok(tenant) = v.session.principal.tenant_for(Some(tenant)) else {
        return missing(&v);
    };
    let read = async {
        let o = st.app.queue.orchestration(tenant, id).await?;
        let s = st.app.queue.orchestration_signals(tenant, id).await?;
        drover::Result::Ok((o, s))
    };
    let read: drover::Result<_> = read.await;
    let (o, signals) = match read {
        Ok(x) => x,
        Err(e) if e.kind() == drover::ErrorKind::NotFound => return missing(&v),
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Orchestrations",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let history = o
        .history
        .iter()
        .rev()
        .map(|h| StepView {
            step: h.step.clone(),
            attempt: h.attempt,
            started: time(h.started),
            ended: time(h.ended),
            took: age(((h.ended - h.started).num_milliseconds() as f64 / 1000.0).max(0.0)),
            outcome: h.outcome.clone(),
        })
        .collect();
    let signals = signals
        .into_iter()
        .map(|s| SignalView {
            name: s.name,
            sent: when(s.created_at),
            consumed: opt_time(s.consumed_at),
            key: s.idempotency_key.unwrap_or_else(|| "-".to_owned()),
            payload: serde_json::to_string(&s.payload).unwrap_or_default(),
        })
        .collect();
    let operate = v.can_operate() && !st.app.auth.is_read_only();
    let back = format!(
        "{}/orchestrations/{}/{}",
        st.config.base(),
        o.tenant_id,
        o.id
    );
    render(
        &OrchestrationPage {
            nav: nav(&st, &v, "Orchestrations", q.msg),
            status: o.status.as_str().to_owned(),
            created: when(o.created_at),
            updated: when(o.updated_at),
            parked_until: opt_time(o.parked_until),
            history,
            signals,
            compensation: compensation(&o),
            state: serde_json::to_string_pretty(&o.state).unwrap_or_default(),
            result: o
                .result
                .as_ref()
                .map(|r| serde_json::to_string_pretty(r).unwrap_or_default())
                .unwrap_or_default(),
            can_operate: operate,
            can_cancel: !o.status.is_final() && o.status != OrchestrationStatus::Compensating,
            can_resume: o.status == OrchestrationStatus::Stuck,
            can_signal: !o.status.is_final(),
            back,
            o,
        },
        StatusCode::OK,
    )
}
