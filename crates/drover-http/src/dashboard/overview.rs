//! The overview: what is wrong and where, from the shared snapshot (a
//! page view queries nothing itself).
//!
//! - Alerts, inline and first: a lane with waiting work and no live worker
//!   serving it ("no worker"); a kind with waiting work that no live
//!   worker handles ("unhandled"); a sweep with no completed pass for
//!   [`SWEEP_STALLED_AFTER`]; a dead letter that grew in the last hour; a
//!   transaction open for [`XACT_OLD_AFTER`] (PostgreSQL).
//! - Per-lane and per-kind tables: waiting, running, done and failed in
//!   the last hour, oldest wait, the live workers serving it.
//! - Charts of the last hour (per minute) and day (per half hour): done
//!   and failed items, and available-to-done time, from the store's
//!   per-minute history, so a restart blanks nothing.
//!
//! A kind is handled by a live worker whose recorded kinds name it, or
//! whose kinds are not recorded (a row of an older worker) when this
//! server registers the kind (the data behind `/v1/stats`'s
//! `unhandled_kinds`).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::TimeDelta;
use drover::Status;
use drover::store::WorkerRow;

use super::DashState;
use super::charts::{add_waits, buckets, latency_svg, ms_label, queue_wait_svg, throughput_svg};
use super::live::Snapshot;
use super::pages::{MsgQuery, Nav, ScopedPage, age, nav, render, time, viewer};

/// A sweep whose last completed pass is older than this is stalled (20
/// default intervals).
pub const SWEEP_STALLED_AFTER: TimeDelta = TimeDelta::minutes(5);
/// A transaction open longer than this is old: it holds back vacuum and
/// the count rollup.
pub const XACT_OLD_AFTER: std::time::Duration = std::time::Duration::from_secs(300);

/// One alert: its class (for styling and tests), its text, a link.
pub(super) struct Alert {
    pub class: &'static str,
    pub text: String,
    pub href: String,
}

/// One row of the per-lane or per-kind table.
#[derive(Default)]
pub(super) struct Row {
    pub name: String,
    pub paused: bool,
    pub waiting: i64,
    pub running: i64,
    pub done_hour: i64,
    pub failed_hour: i64,
    pub latency: String,
    pub oldest: String,
    pub workers: usize,
    /// "no worker", "unhandled" or empty.
    pub alert: &'static str,
}

/// Whether a live worker `w` handles `kind` (see the module docs).
fn handles(w: &WorkerRow, kind: &str, registered: &dyn Fn(&str) -> bool) -> bool {
    if w.kinds.is_empty() {
        registered(kind)
    } else {
        w.kinds.iter().any(|k| k == kind)
    }
}

/// The tables and the alerts of a snapshot.
pub(super) fn analyse(
    snap: &Snapshot,
    registered: &dyn Fn(&str) -> bool,
    base: &str,
) -> (Vec<Alert>, Vec<Row>, Vec<Row>) {
    let live: Vec<&WorkerRow> = snap.workers.iter().filter(|w| w.is_live()).collect();
    let mut lanes: BTreeMap<String, Row> = BTreeMap::new();
    let mut kinds: BTreeMap<String, Row> = BTreeMap::new();
    for c in &snap.counts {
        for (map, key) in [(&mut lanes, &c.lane), (&mut kinds, &c.kind)] {
            let r = map.entry(key.clone()).or_default();
            match c.status {
                Status::Pending => r.waiting += c.count,
                Status::Claimed => r.running += c.count,
                _ => {}
            }
        }
    }
    let mut lane_ms: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut kind_ms: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for g in &snap.history.groups_hour {
        for (map, ms, key) in [
            (&mut lanes, &mut lane_ms, &g.lane),
            (&mut kinds, &mut kind_ms, &g.kind),
        ] {
            let r = map.entry(key.clone()).or_default();
            r.done_hour += g.done;
            r.failed_hour += g.failed;
            let e = ms.entry(key.clone()).or_default();
            e.0 += g.latency_ms_sum;
            e.1 += g.done;
        }
    }
    for w in &live {
        for l in &w.lanes {
            lanes.entry(l.clone()).or_default();
        }
    }
    for l in &snap.paused {
        lanes.entry(l.clone()).or_default();
    }
    // The lanes each kind waits in, for "handled in one of its lanes".
    let mut kind_lanes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for c in snap.counts.iter().filter(|c| c.status == Status::Pending) {
        kind_lanes.entry(&c.kind).or_default().insert(&c.lane);
    }
    let mut alerts = Vec::new();
    let lanes: Vec<Row> = lanes
        .into_iter()
        .map(|(name, mut r)| {
            r.workers = live.iter().filter(|w| w.lanes.contains(&name)).count();
            r.paused = snap.paused.contains(&name);
            r.oldest = snap
                .gauges
                .oldest_age_seconds
                .iter()
                .find(|(l, _)| *l == name)
                .map_or_else(|| "-".to_owned(), |(_, a)| age(*a));
            r.latency = mean(lane_ms.get(&name));
            if r.waiting > 0 && r.workers == 0 {
                r.alert = "no worker";
                alerts.push(Alert {
                    class: "no-worker",
                    text: format!(
                        "lane {name}: {} waiting, no worker: no live worker serves this lane{}",
                        r.waiting,
                        if r.paused { " (and it is paused)" } else { "" }
                    ),
                    href: format!(
                        "{base}/items?status=pending&lane={}",
                        super::actions::encode(&name)
                    ),
                });
            }
            r.name = name;
            r
        })
        .collect();
    let kinds = kind_rows(
        kinds,
        &kind_lanes,
        &kind_ms,
        &live,
        registered,
        base,
        &mut alerts,
    );
    system_alerts(snap, &lanes, base, &mut alerts);
    (alerts, lanes, kinds)
}

/// The per-kind rows, with their "unhandled" alerts.
fn kind_rows(
    kinds: BTreeMap<String, Row>,
    kind_lanes: &BTreeMap<&str, BTreeSet<&str>>,
    kind_ms: &BTreeMap<String, (i64, i64)>,
    live: &[&WorkerRow],
    registered: &dyn Fn(&str) -> bool,
    base: &str,
    alerts: &mut Vec<Alert>,
) -> Vec<Row> {
    kinds
        .into_iter()
        .map(|(name, mut r)| {
            let in_lanes = kind_lanes.get(name.as_str());
            let serving = |w: &&&WorkerRow| {
                handles(w, &name, registered)
                    && in_lanes.is_none_or(|ls| w.lanes.iter().any(|l| ls.contains(l.as_str())))
            };
            r.workers = live.iter().filter(serving).count();
            r.latency = mean(kind_ms.get(&name));
            r.oldest = "-".to_owned();
            // Where every lane it waits in has no live worker at all, the
            // lanes' "no worker" says it already.
            let lanes_unserved = in_lanes.is_some_and(|ls| {
                ls.iter()
                    .all(|l| !live.iter().any(|w| w.lanes.iter().any(|wl| wl == l)))
            });
            if r.waiting > 0 && r.workers == 0 && !lanes_unserved {
                r.alert = "unhandled";
                alerts.push(Alert {
                    class: "unhandled",
                    text: format!(
                        "kind {name}: {} waiting, unhandled: no live worker of its lanes runs it{}",
                        r.waiting,
                        if registered(&name) {
                            ""
                        } else {
                            " and no registration on this server knows it"
                        }
                    ),
                    href: format!(
                        "{base}/items?status=pending&kind={}",
                        super::actions::encode(&name)
                    ),
                });
            }
            r.name = name;
            r
        })
        .collect()
}

fn mean(v: Option<&(i64, i64)>) -> String {
    match v {
        Some((sum, n)) if *n > 0 => ms_label(sum / n),
        _ => "-".to_owned(),
    }
}

/// The sweep, the dead letter and the oldest transaction.
fn system_alerts(snap: &Snapshot, lanes: &[Row], base: &str, alerts: &mut Vec<Alert>) {
    let any_items = !snap.counts.is_empty();
    match snap.sweep_last {
        None if any_items => alerts.push(Alert {
            class: "sweep",
            text: "sweep: no completed pass recorded (does a worker run the maintenance role?)"
                .to_owned(),
            href: format!("{base}/workers"),
        }),
        Some(t) if snap.at - t > SWEEP_STALLED_AFTER => alerts.push(Alert {
            class: "sweep",
            text: format!(
                "sweep stalled: its last completed pass ended {} ago ({})",
                age((snap.at - t).num_milliseconds() as f64 / 1000.0),
                time(t)
            ),
            href: format!("{base}/workers"),
        }),
        _ => {}
    }
    let grew: i64 = lanes.iter().map(|r| r.failed_hour).sum();
    if grew > 0 {
        alerts.push(Alert {
            class: "dead-letter",
            text: format!(
                "dead letter grew by {grew} in the last hour (now {})",
                snap.gauges.failed
            ),
            href: format!("{base}/dead"),
        });
    }
    if let Some(a) = snap.oldest_xact.filter(|a| *a > XACT_OLD_AFTER) {
        alerts.push(Alert {
            class: "xact",
            text: format!(
                "a transaction has been open for {}: it holds back vacuum and the count rollup \
                 (pg_stat_activity)",
                age(a.as_secs_f64())
            ),
            href: String::new(),
        });
    }
}

#[derive(Template)]
#[template(path = "dashboard/overview_live.html")]
struct OverviewLive {
    base: String,
    at: String,
    error: Option<String>,
    failed: i64,
    workers_live: usize,
    workers_total: usize,
    running: usize,
    sweep: String,
    xact: String,
    history_at: String,
    alerts: Vec<Alert>,
    lanes: Vec<Row>,
    kinds: Vec<Row>,
    charts: Vec<String>,
}

/// The overview's live part, rendered from a snapshot (shared by the page
/// and every server-sent event).
pub(super) fn overview_fragment(st: &DashState, snap: &Snapshot) -> String {
    let base = st.config.base();
    let registered = |k: &str| st.app.queue.kind_registered(k);
    let (alerts, lanes, kinds) = analyse(snap, &registered, &base);
    let now = snap.at;
    let rows = &snap.history.minutes;
    let mut hour = buckets(rows, now, TimeDelta::hours(1), 60);
    let mut day = buckets(rows, now, TimeDelta::hours(24), 48);
    add_waits(&mut hour, &snap.history.waits, now, TimeDelta::hours(1));
    add_waits(&mut day, &snap.history.waits, now, TimeDelta::hours(24));
    let charts = vec![
        throughput_svg("chart-hour", "Last hour: done and failed", "minute", &hour),
        latency_svg("wait-hour", "Last hour: available → done", &hour),
        queue_wait_svg("queue-wait-hour", "Last hour: queue wait", &hour),
        throughput_svg("chart-day", "Last day: done and failed", "30 min", &day),
        latency_svg("wait-day", "Last day: available → done", &day),
        queue_wait_svg("queue-wait-day", "Last day: queue wait", &day),
    ];
    let t = OverviewLive {
        at: time(snap.at),
        error: snap.error.clone(),
        failed: snap.gauges.failed,
        workers_live: snap.workers.iter().filter(|w| w.is_live()).count(),
        workers_total: snap.workers.len(),
        running: snap.running.len(),
        sweep: snap.sweep_last.map_or_else(
            || "never".to_owned(),
            |t| format!("{} ago", age((now - t).num_milliseconds() as f64 / 1000.0)),
        ),
        xact: match snap.oldest_xact {
            Some(a) => age(a.as_secs_f64()),
            None => match st.app.queue.backend() {
                drover::store::Backend::Sqlite => {
                    "not tracked on SQLite (one writer; no long transaction to watch)".to_owned()
                }
                _ => "not tracked on this store".to_owned(),
            },
        },
        history_at: snap.history.at.map_or_else(|| "-".to_owned(), time),
        alerts,
        lanes,
        kinds,
        charts,
        base,
    };
    t.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "the overview fragment failed to render");
        String::new()
    })
}

#[derive(Template)]
#[template(path = "dashboard/overview.html")]
struct OverviewPage {
    nav: Nav,
    fragment: String,
}

/// Overview: alerts, per-lane and per-kind tables, the charts. Read from
/// the shared snapshot.
pub(super) async fn overview(
    State(st): State<DashState>,
    headers: HeaderMap,
    Query(q): Query<MsgQuery>,
) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Some(tenant) = v.session.principal.tenant {
        let nav = nav(&st, &v, "Overview", q.msg);
        return render(&ScopedPage { nav, tenant }, StatusCode::OK);
    }
    let snap = st.live.latest().await;
    let fragment = overview_fragment(&st, &snap);
    render(
        &OverviewPage {
            nav: nav(&st, &v, "Overview", q.msg),
            fragment,
        },
        StatusCode::OK,
    )
}

/// Server-sent events: the overview fragment after each shared refresh.
pub(super) async fn live_events(State(st): State<DashState>, headers: HeaderMap) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if v.session.principal.tenant.is_some() {
        return (StatusCode::FORBIDDEN, "installation-wide view").into_response();
    }
    let rx = st.live.subscribe();
    let stream = futures::stream::unfold((rx, st), |(mut rx, st)| async move {
        loop {
            match rx.recv().await {
                Ok(snap) => {
                    let html = overview_fragment(&st, &snap);
                    let ev = Event::default().event("overview").data(html);
                    return Some((Ok::<_, Infallible>(ev), (rx, st)));
                }
                // A slow tab skips to the newest snapshot.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use std::sync::Arc;

    use chrono::Utc;
    use drover::store::throughput::ThroughputRow;
    use drover::store::{CountRow, Gauges};

    use super::*;
    use crate::dashboard::live::History;

    fn snap() -> Snapshot {
        Snapshot {
            at: Utc::now(),
            counts: vec![CountRow {
                lane: "default".into(),
                kind: "k".into(),
                status: Status::Done,
                count: 5,
            }],
            gauges: Gauges::default(),
            workers: vec![],
            paused: vec![],
            running: vec![],
            sweep_last: None,
            oldest_xact: None,
            history: Arc::new(History::default()),
            error: None,
        }
    }

    fn classes(s: &Snapshot) -> Vec<&'static str> {
        analyse(s, &|_| true, "/ui")
            .0
            .iter()
            .map(|a| a.class)
            .collect()
    }

    #[test]
    fn a_stalled_sweep_and_an_old_transaction_alert() {
        let mut s = snap();
        assert_eq!(classes(&s), ["sweep"], "no pass recorded");
        s.sweep_last = Some(s.at - TimeDelta::seconds(30));
        assert!(classes(&s).is_empty(), "a recent pass");
        s.sweep_last = Some(s.at - TimeDelta::minutes(6));
        s.oldest_xact = Some(std::time::Duration::from_secs(301));
        let (alerts, _, _) = analyse(&s, &|_| true, "/ui");
        assert_eq!(
            alerts.iter().map(|a| a.class).collect::<Vec<_>>(),
            ["sweep", "xact"]
        );
        assert!(
            alerts[0].text.contains("sweep stalled"),
            "{}",
            alerts[0].text
        );
        assert!(alerts[1].text.contains("5m 1s"), "{}", alerts[1].text);
        s.oldest_xact = Some(std::time::Duration::from_secs(299));
        assert_eq!(classes(&s), ["sweep"]);
    }

    #[test]
    fn a_growing_dead_letter_alerts_and_is_counted_per_lane_and_kind() {
        let mut s = snap();
        s.sweep_last = Some(s.at);
        s.history = Arc::new(History {
            at: Some(s.at),
            minutes: vec![],
            groups_hour: vec![ThroughputRow {
                minute: s.at,
                lane: "default".into(),
                kind: "k".into(),
                done: 4,
                failed: 2,
                latency_ms_sum: 4000,
                latency_ms_max: 1500,
            }],
            waits: vec![],
        });
        let (alerts, lanes, kinds) = analyse(&s, &|_| true, "/ui");
        assert_eq!(alerts.len(), 1);
        assert!(alerts[0].text.contains("grew by 2"));
        assert_eq!((lanes[0].done_hour, lanes[0].failed_hour), (4, 2));
        assert_eq!(kinds[0].latency, "1.0s");
    }

    #[test]
    fn unrecorded_kinds_count_only_for_kinds_this_server_registers() {
        let mut s = snap();
        s.sweep_last = Some(s.at);
        s.counts.push(CountRow {
            lane: "default".into(),
            kind: "k".into(),
            status: Status::Pending,
            count: 1,
        });
        let mut w = drover::store::WorkerRow {
            id: "w".into(),
            host: "h".into(),
            pid: 1,
            lanes: vec!["default".into()],
            capacity: 1,
            started_at: s.at,
            last_beat_at: s.at,
            state: "running".into(),
            beat_interval_ms: 1000,
            kinds: vec![],
            version: String::new(),
        };
        s.workers = vec![w.clone()];
        assert!(classes(&s).is_empty(), "registered here: handled");
        let (alerts, _, _) = analyse(&s, &|_| false, "/ui");
        assert_eq!(alerts.len(), 1);
        assert!(alerts[0].text.contains("unhandled") && alerts[0].text.contains("no registration"));
        w.kinds = vec!["k".into()];
        s.workers = vec![w];
        let (alerts, _, _) = analyse(&s, &|_| false, "/ui");
        assert!(
            alerts.is_empty(),
            "a worker that records the kind handles it"
        );
    }
}
