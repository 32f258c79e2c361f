//! The overview of a tenant-scoped viewer: its own tenant's items per lane
//! and per kind, its dead letter, its alerts and its charts, counted for it
//! alone.
//!
//! Invariant: nothing installation-wide is shown here (workers and their
//! hosts, schedules, other tenants' counts or history): those need a token
//! of no tenant, on the pages as in the API. The one fact about workers it
//! uses is whether a live one drains a lane the tenant has waiting items
//! in ("no worker"), which the item page's "why it waits" tells the same
//! tenant already. The counts ([`drover::Queue::counts_tenant`]: the
//! rollup and the pending and claimed rows' indexes, narrowed to the
//! tenant) and the history (the per-minute rollup's rows of the tenant)
//! are read at most once per interval per tenant (`Live`), not from the
//! shared live snapshot, which counts every tenant.

use std::collections::BTreeMap;

use askama::Template;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;
use drover::Status;
use uuid::Uuid;

use super::DashState;
use super::charts::{buckets, latency_svg, throughput_svg};
use super::fmt::{When, when};
use super::overview::Alert;
use super::pages::{MsgQuery, Nav, nav, note_page, render, viewer};

/// One line of a tenant's counts: a lane or a kind, and its items per
/// status (pending, claimed, done, failed, cancelled).
pub(super) struct CountLine {
    name: String,
    n: [i64; 5],
}

#[derive(Template)]
#[template(path = "dashboard/tenant_overview.html")]
struct TenantOverview {
    nav: Nav,
    tenant: Uuid,
    at: When,
    failed: i64,
    lanes: Vec<CountLine>,
    kinds: Vec<CountLine>,
    alerts: Vec<Alert>,
    /// Server-rendered SVG of the tenant's own history.
    charts: Vec<String>,
}

fn slot(s: Status) -> usize {
    match s {
        Status::Pending => 0,
        Status::Claimed => 1,
        Status::Done => 2,
        Status::Failed => 3,
        Status::Cancelled => 4,
    }
}

fn lines(map: BTreeMap<String, [i64; 5]>) -> Vec<CountLine> {
    map.into_iter()
        .map(|(name, n)| CountLine { name, n })
        .collect()
}

/// The overview for a viewer confined to one tenant (an unscoped one,
/// should its token have changed since the session began, gets the
/// installation-wide note of the scoped pages' kind: the overview route
/// chose this page by the session's scope).
pub(super) async fn overview(st: DashState, headers: HeaderMap, q: MsgQuery) -> Response {
    let st = &st;
    let v = match viewer(st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let v = &v;
    let msg = q.msg;
    let Some(tenant) = v.session.principal.tenant else {
        return note_page(
            st,
            v,
            "Overview",
            "the token is no longer scoped to a tenant: reload the overview".into(),
            StatusCode::OK,
        );
    };
    let rows = match st.live.counts_tenant(tenant).await {
        Ok(r) => r,
        Err(e) => {
            return note_page(
                st,
                v,
                "Overview",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let mut lanes: BTreeMap<String, [i64; 5]> = BTreeMap::new();
    let mut kinds: BTreeMap<String, [i64; 5]> = BTreeMap::new();
    for r in rows.iter() {
        lanes.entry(r.lane.clone()).or_default()[slot(r.status)] += r.count;
        kinds.entry(r.kind.clone()).or_default()[slot(r.status)] += r.count;
    }
    let failed = lanes.values().map(|n| n[3]).sum();
    let now = Utc::now();
    let history = match st.live.history_tenant(tenant).await {
        Ok(h) => h,
        Err(e) => {
            return note_page(
                st,
                v,
                "Overview",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let hour = buckets(&history, now, chrono::TimeDelta::hours(1), 60);
    let day = buckets(&history, now, chrono::TimeDelta::hours(24), 48);
    let charts = vec![
        throughput_svg("chart-hour", "Last hour: done and failed", "minute", &hour),
        latency_svg("wait-hour", "Last hour: available → done", &hour),
        throughput_svg("chart-day", "Last day: done and failed", "30 min", &day),
        latency_svg("wait-day", "Last day: available → done", &day),
    ];
    let snap = st.live.latest().await;
    let base = st.config.base();
    let mut alerts: Vec<Alert> = lanes
        .iter()
        .filter(|(lane, n)| {
            n[0] > 0
                && !snap
                    .workers
                    .iter()
                    .any(|w| w.is_live() && w.lanes.iter().any(|l| l == *lane))
        })
        .map(|(lane, n)| Alert {
            class: "no-worker",
            text: format!(
                "lane {lane}: {} waiting, no worker: no live worker serves this lane",
                n[0]
            ),
            href: format!("{base}/items?lane={lane}&status=pending"),
        })
        .collect();
    let grew: i64 = hour.iter().map(|b| b.failed).sum();
    if grew > 0 {
        alerts.push(Alert {
            class: "dead-letter",
            text: format!("dead letter grew by {grew} in the last hour (now {failed})"),
            href: format!("{base}/dead"),
        });
    }
    render(
        &TenantOverview {
            nav: nav(st, v, "Overview", msg),
            tenant,
            at: when(now, now),
            failed,
            lanes: lines(lanes),
            kinds: lines(kinds),
            alerts,
            charts,
        },
        StatusCode::OK,
    )
}
