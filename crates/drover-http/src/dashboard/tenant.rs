//! The overview of a tenant-scoped viewer: its own tenant's items per lane
//! and per kind, and its dead letter, counted for it alone.
//!
//! Invariant: nothing installation-wide is shown here (workers and their
//! hosts, schedules, other tenants' counts, the throughput charts, which
//! count every tenant): those need a token of no tenant, on the pages as in
//! the API. The counts are read per view ([`drover::Queue::counts_tenant`]:
//! the rollup and the pending and claimed rows' indexes, narrowed to the
//! tenant), not from the shared live snapshot, which counts every tenant.

use std::collections::BTreeMap;

use askama::Template;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;
use drover::Status;
use uuid::Uuid;

use super::DashState;
use super::fmt::{When, when};
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
    render(
        &TenantOverview {
            nav: nav(st, v, "Overview", msg),
            tenant,
            at: when(now, now),
            failed,
            lanes: lines(lanes),
            kinds: lines(kinds),
        },
        StatusCode::OK,
    )
}
