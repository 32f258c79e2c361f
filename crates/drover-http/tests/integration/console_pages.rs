//! The operator's console, overview and role pages (issue 29), over a real
//! store of each backend:
//!
//! - the overview names a lane with waiting work and no live worker ("no
//!   worker"), a kind no live worker handles ("unhandled"), a sweep with
//!   no completed pass, and a dead letter that grew; its per-lane and
//!   per-kind tables count the last hour; its charts have labelled axes
//!   and are read from the store, so a new server (a restart) shows the
//!   same history;
//! - the workers page shows version, in flight against capacity and what
//!   each runs now;
//! - the schedules page shows the next three runs, and "trigger now"
//!   enqueues one item created by the token, behind the CSRF check and the
//!   operator role;
//! - orchestration ids link to a detail page (state, step, history,
//!   signals) whose signal, cancel and resume actions work, and a stuck
//!   one is highlighted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use drover::orchestration::{OrchestrationStatus, RecordWrite, Transition};
use drover::periodic::{MisfirePolicy, Schedule, ScheduleDecl};
use drover::queue::{Principal, Queue};
use drover::store::WorkerRow;
use drover::store::contract::Harness;
use drover::{NewItem, Status};
use drover_http::dashboard::{
    self, DashState, DashboardConfig, ScheduleTriggers, live::Live, session::Sessions,
};
use drover_http::tokens::{self, TokenGrant};
use drover_http::{AppState, HttpConfig, Role, TokenSecret};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;
use uuid::Uuid;

#[derive(serde::Serialize, serde::Deserialize)]
struct Nightly {}
impl drover::Kind for Nightly {
    const NAME: &'static str = "report.nightly";
}

struct Fx {
    app: Router,
    queue: Queue,
    live: Arc<Live>,
    state: DashState,
    harness: Harness,
    operator: TokenSecret,
    viewer: TokenSecret,
}

async fn mint(queue: &Queue, role: Role) -> TokenSecret {
    tokens::create(
        queue,
        &TokenGrant {
            role,
            tenant: None,
            enqueue: vec!["*".into()],
            label: format!("console {}", role.as_str()),
            work: vec![],
        },
    )
    .await
    .unwrap()
    .0
}

fn dash(
    queue: &Queue,
    auth: drover_http::Auth,
    config: DashboardConfig,
) -> (Router, Arc<Live>, DashState) {
    let live = Live::new(queue.clone(), Duration::from_secs(3600));
    let app_state = AppState {
        live: live.clone(),
        queue: queue.clone(),
        auth,
        config: Arc::new(HttpConfig::default()),
        gather: Arc::new(drover_http::api::gather::Gatherer::new(
            queue.clone(),
            drover_http::api::gather::GatherConfig::default(),
        )),
        work: Arc::default(),
    };
    let state = DashState {
        app: app_state,
        sessions: Sessions::new(config.session_ttl),
        live: live.clone(),
        config: Arc::new(config),
    };
    (dashboard::routes_with(state.clone()), live, state)
}

async fn fixture(harness: Harness) -> Fx {
    let queue = Queue::new(harness.store.clone());
    let operator = mint(&queue, Role::Operator).await;
    let viewer = mint(&queue, Role::Viewer).await;
    let auth = tokens::auth_from_store(&queue).await.unwrap();
    let nightly = Schedule::new("nightly", "0 3 * * *", Nightly {})
        .compile()
        .unwrap();
    let config = DashboardConfig {
        schedules: ScheduleTriggers::new(vec![nightly]),
        live_interval: Duration::from_secs(3600),
        ..DashboardConfig::default()
    };
    let (app, live, state) = dash(&queue, auth, config);
    Fx {
        app,
        queue,
        live,
        state,
        harness,
        operator,
        viewer,
    }
}

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (s, h) = (res.status(), res.headers().clone());
    let b = res.into_body().collect().await.unwrap().to_bytes();
    (s, h, String::from_utf8_lossy(&b).into_owned())
}

fn get(path: &str, cookie: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, "dash.test")
        .header(header::COOKIE, cookie)
        .body(Body::empty())
        .unwrap()
}

fn post(path: &str, cookie: &str, form: &str) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "dash.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .header(header::COOKIE, cookie)
        .body(Body::from(form.to_owned()))
        .unwrap()
}

async fn login(app: &Router, secret: &TokenSecret) -> (String, String) {
    let req = Request::post("/ui/login")
        .header(header::HOST, "dash.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(format!("token={}", secret.expose())))
        .unwrap();
    let (s, h, body) = send(app, req).await;
    assert_eq!(s, StatusCode::SEE_OTHER, "{body}");
    let cookie = h[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (_, _, page) = send(app, get("/ui/items", &cookie)).await;
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    (cookie, page[at..at + 64].to_owned())
}

async fn put(q: &Queue, kind: &str, lane: &str) -> Uuid {
    q.enqueue_item(
        &Principal::system(),
        NewItem::new(kind, json!({})).with_lane(lane),
    )
    .await
    .unwrap()
    .item
    .id
}

fn worker(id: &str, lanes: &[&str], kinds: &[&str], capacity: i32) -> WorkerRow {
    WorkerRow {
        id: id.into(),
        host: "host-a".into(),
        pid: 42,
        lanes: lanes.iter().map(|s| (*s).to_owned()).collect(),
        capacity,
        started_at: chrono::Utc::now(),
        last_beat_at: chrono::Utc::now(),
        state: "running".into(),
        beat_interval_ms: 60_000,
        kinds: kinds.iter().map(|s| (*s).to_owned()).collect(),
        version: "9.9.9-test".into(),
    }
}

/// The text of the element with `id`'s opening tag onward, to its end tag
/// `until` (for asserting on one table or list).
fn section<'a>(page: &'a str, id: &str, until: &str) -> &'a str {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {page}"));
    let rest = &page[at..];
    &rest[..rest.find(until).unwrap_or(rest.len())]
}

async fn overview_alerts_tables_and_history(f: Fx) {
    let q = &f.queue;
    // A live worker serves "reports" and runs report.build only.
    q.store()
        .worker_beat(&worker("w-1", &["reports"], &["report.build"], 4))
        .await
        .unwrap();
    // Work in a lane nobody serves, and a kind nobody runs.
    put(q, "orphan.job", "orphan").await;
    put(q, "orphan.job", "orphan").await;
    put(q, "mystery.kind", "reports").await;
    // Two done and one dead-lettered in "reports".
    for _ in 0..3 {
        put(q, "report.build", "reports").await;
    }
    let batch = q
        .claim(
            "reports",
            &["report.build".to_owned()],
            "w-1",
            Duration::from_secs(60),
            3,
        )
        .await
        .unwrap();
    let mut cxs = batch.items.into_iter();
    q.complete(&cxs.next().unwrap()).await.unwrap();
    q.complete(&cxs.next().unwrap()).await.unwrap();
    q.fail(&cxs.next().unwrap(), "disk full", true)
        .await
        .unwrap();
    // The settlement stops a second short of the store's clock (and, on
    // PostgreSQL, of the oldest open transaction): settle until the three
    // outcomes are in the history.
    let since = q.db_now().await.unwrap() - chrono::TimeDelta::hours(1);
    for _ in 0..100 {
        f.harness.pass(Duration::from_millis(200)).await;
        q.store().counts_settle().await.unwrap();
        let rows = q
            .throughput(&drover::store::throughput::ThroughputQuery {
                since,
                tenant_id: None,
                by: drover::store::throughput::ThroughputBy::Minute,
            })
            .await
            .unwrap();
        if rows.iter().map(|r| r.done + r.failed).sum::<i64>() == 3 {
            break;
        }
    }
    // What a sweep pass records: the orphan lane's oldest item waited 90 s.
    let at = q.db_now().await.unwrap();
    q.store()
        .wait_record(at, &[("orphan".into(), 90.0)])
        .await
        .unwrap();
    // On PostgreSQL, a transaction of another session of the store's login
    // stays open across the read, so the overview has one to show: the
    // suite's other tests usually hold some, but not always (it read "-").
    let _open = if q.backend() == drover::store::Backend::Postgres {
        use sqlx::{Connection, Executor};
        let mut c = sqlx::PgConnection::connect(&drover::testing::pg_owner_url().await)
            .await
            .unwrap();
        c.execute("BEGIN").await.unwrap();
        c.execute("SELECT txid_current()").await.unwrap();
        f.harness.pass(Duration::from_millis(100)).await;
        Some(c)
    } else {
        None
    };
    f.live.refresh().await;

    let (cookie, _) = login(&f.app, &f.viewer).await;
    let (s, h, page) = send(&f.app, get("/ui/", &cookie)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(h[header::CONTENT_SECURITY_POLICY], dashboard::CSP);
    let alerts = section(&page, "alerts", "</ul>");
    assert!(
        alerts.contains("alert-no-worker") && alerts.contains("lane orphan: 2 waiting, no worker"),
        "{alerts}"
    );
    assert!(
        alerts.contains("alert-unhandled")
            && alerts.contains("kind mystery.kind: 1 waiting, unhandled"),
        "{alerts}"
    );
    assert!(
        !alerts.contains("lane reports")
            && !alerts.contains("kind report.build")
            && !alerts.contains("kind orphan.job"),
        "a served lane, a handled kind and a kind whose lane has no worker raise nothing: {alerts}"
    );
    assert!(
        alerts.contains("sweep: no completed pass recorded"),
        "{alerts}"
    );
    assert!(
        alerts.contains("dead letter grew by 1 in the last hour"),
        "{alerts}"
    );
    let lanes = section(&page, "lane-counts", "</table>");
    assert!(
        lanes.contains("data-lane=\"orphan\" class=\"alerting\""),
        "{lanes}"
    );
    let kinds = section(&page, "kind-table", "</table>");
    let row = &kinds[kinds.find("data-kind=\"report.build\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    // waiting 0, running 0, done 2, failed 1 in the last hour.
    assert!(
        row.contains("<td class=\"num\">0</td><td class=\"num\">0</td><td class=\"num\">2</td><td class=\"num\">1</td>"),
        "{row}"
    );
    for needle in [
        "id=\"chart-hour\"",
        "id=\"wait-day\"",
        "id=\"queue-wait-hour\"",
        "id=\"queue-wait-day\"",
        "Last hour: queue wait",
        "oldest waiting",
        "time (UTC)",
        "items per minute",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    assert!(
        page.contains("2 done · 1 failed"),
        "the hour chart's totals"
    );
    let xact = section(&page, "oldest-xact", "</span>");
    match q.backend() {
        drover::store::Backend::Sqlite => assert!(xact.contains("not tracked on SQLite"), "{xact}"),
        drover::store::Backend::Postgres => assert!(xact.ends_with('s'), "{xact}"),
        _ => {}
    }

    // A new server over the same store (a restart) shows the same history.
    let auth = tokens::auth_from_store(q).await.unwrap();
    let (app2, live2, _) = dash(q, auth, DashboardConfig::default());
    live2.refresh().await;
    let (cookie2, _) = login(&app2, &f.viewer).await;
    let (_, _, again) = send(&app2, get("/ui/", &cookie2)).await;
    assert!(
        again.contains("2 done · 1 failed"),
        "a restart blanks no chart"
    );
    let wait = section(&again, "queue-wait-hour", "</svg>");
    assert!(
        wait.contains(": oldest waiting 1.5m") && wait.contains("max 1.5m"),
        "a restart blanks no queue wait: {wait}"
    );

    // A completed sweep pass clears the sweep alert; a worker of the lane
    // clears "no worker".
    let token = q
        .store()
        .sweep_lease_take("t", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    q.store().sweep_lease_release(token, true).await.unwrap();
    q.store()
        .worker_beat(&worker("w-2", &["orphan"], &["orphan.job"], 1))
        .await
        .unwrap();
    f.live.refresh().await;
    let (_, _, page) = send(&f.app, get("/ui/", &cookie)).await;
    assert!(
        !page.contains("alert-sweep") && !page.contains("alert-no-worker"),
        "{page}"
    );
    assert!(page.contains("alert-unhandled"));
    f.harness.finish().await;
}

async fn workers_show_in_flight_and_running(f: Fx) {
    let q = &f.queue;
    q.store()
        .worker_beat(&worker("w-busy", &["reports"], &["report.build"], 4))
        .await
        .unwrap();
    let id = put(q, "report.build", "reports").await;
    put(q, "report.build", "reports").await;
    q.claim("reports", &[], "w-busy", Duration::from_secs(60), 1)
        .await
        .unwrap();
    // The page shows the live view's workers and runs (one interval old at
    // most): read them now.
    f.live.refresh().await;
    let (cookie, _) = login(&f.app, &f.viewer).await;
    let (s, _, page) = send(&f.app, get("/ui/workers", &cookie)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let w = section(&page, "workers", "</table>");
    assert!(w.contains("9.9.9-test") && w.contains("1 / 4"), "{w}");
    let running = section(&page, "running", "</table>");
    assert!(
        running.contains("w-busy") && running.contains("report.build"),
        "{running}"
    );
    let claimed = q
        .list(&drover::store::ListFilter {
            status: Some(Status::Claimed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(running.contains(&claimed[0].id.to_string()));
    let _ = id;
    f.harness.finish().await;
}

async fn schedules_next_runs_and_trigger(f: Fx) {
    let q = &f.queue;
    for (name, cron) in [("nightly", "0 3 * * *"), ("elsewhere", "*/5 * * * *")] {
        q.store()
            .schedule_upsert(&ScheduleDecl {
                name: name.into(),
                cron: cron.into(),
                zone: "UTC".into(),
                kind: "report.nightly".into(),
                lane: "default".into(),
                misfire: MisfirePolicy::default(),
            })
            .await
            .unwrap();
    }
    let (cookie, csrf) = login(&f.app, &f.operator).await;
    let (s, _, page) = send(&f.app, get("/ui/schedules", &cookie)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let row = &page[page.find("data-schedule=\"nightly\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert_eq!(
        row.matches("T03:00:00Z").count(),
        3,
        "three next runs: {row}"
    );
    assert!(row.contains("Trigger now"));
    let other = &page[page.find("data-schedule=\"elsewhere\"").unwrap()..];
    assert!(other.contains("declared by another binary"));

    // Without the CSRF token: refused, nothing enqueued.
    let (s, _, _) = send(
        &f.app,
        post("/ui/schedules/act", &cookie, "action=trigger&name=nightly"),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // A viewer: refused.
    let (vc, vcsrf) = login(&f.app, &f.viewer).await;
    let (s, _, _) = send(
        &f.app,
        post(
            "/ui/schedules/act",
            &vc,
            &format!("csrf={vcsrf}&action=trigger&name=nightly"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let none = q
        .list(&drover::store::ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "refused triggers enqueue nothing");

    let (s, h, _) = send(
        &f.app,
        post(
            "/ui/schedules/act",
            &cookie,
            &format!("csrf={csrf}&action=trigger&name=nightly"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let to = h[header::LOCATION].to_str().unwrap();
    assert!(
        to.starts_with("/ui/schedules?msg=triggered%20nightly"),
        "{to}"
    );
    let items = q
        .list(&drover::store::ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].kind, "report.nightly");
    assert!(
        items[0]
            .idempotency_key
            .as_deref()
            .unwrap()
            .starts_with("periodic:nightly:manual:")
    );
    assert_ne!(
        items[0].created_by,
        Uuid::nil(),
        "created by the operator's token"
    );
    let (_, h, _) = send(
        &f.app,
        post(
            "/ui/schedules/act",
            &cookie,
            &format!("csrf={csrf}&action=trigger&name=elsewhere"),
        ),
    )
    .await;
    assert!(
        h[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("not%20declared%20by%20this%20server")
    );
    f.harness.finish().await;
}

async fn schedule_trigger_over_the_api(f: Fx) {
    let q = &f.queue;
    let auth = tokens::auth_from_store(q).await.unwrap();
    let api = drover_http::router_with(
        q.clone(),
        auth,
        HttpConfig {
            dashboard: (*f.state.config).clone(),
            ..HttpConfig::default()
        },
    );
    let call = |token: &TokenSecret, name: &str| {
        Request::post(format!("/v1/schedules/{name}/trigger"))
            .header(header::AUTHORIZATION, format!("Bearer {}", token.expose()))
            .body(Body::empty())
            .unwrap()
    };
    let (s, _, body) = send(&api, call(&f.viewer, "nightly")).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    let (s, _, body) = send(&api, call(&f.operator, "elsewhere")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    let (s, _, body) = send(&api, call(&f.operator, "nightly")).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let item: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(item["kind"], "report.nightly");
    assert!(
        item["idempotency_key"]
            .as_str()
            .unwrap()
            .starts_with("periodic:nightly:manual:")
    );
    let all = q
        .list(&drover::store::ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.len(),
        1,
        "the viewer's and the unknown schedule's calls enqueued nothing"
    );
    f.harness.finish().await;
}

async fn orchestration_detail_and_actions(f: Fx) {
    let q = &f.queue;
    // Records as a start writes them (the workflow's code is not needed to
    // show and steer them).
    let mut started = Vec::new();
    for order in [7, 8] {
        let mut start =
            drover::orchestration::Start::new("checkout", &json!({"order": order})).unwrap();
        start.lane = "default".into();
        start.first_step = "reserve".into();
        start.max_attempts = 3;
        let (rec, first) = start.build().unwrap();
        started.push(
            q.store()
                .orchestration_insert(&rec, &first)
                .await
                .unwrap()
                .record,
        );
    }
    let (a, b) = (started[0].clone(), started[1].clone());
    // Make b stuck, as an unknown step leaves it.
    let mut w = RecordWrite::of(&b);
    w.status = OrchestrationStatus::Stuck;
    w.resume_as = Some(OrchestrationStatus::Running);
    w.error = Some("unknown step".into());
    q.store()
        .orchestration_update(&Transition {
            tenant_id: b.tenant_id,
            id: b.id,
            expected_version: b.version,
            write: w,
            enqueue: None,
            consume_signal: None,
        })
        .await
        .unwrap();
    let (cookie, csrf) = login(&f.app, &f.operator).await;
    let (s, _, list) = send(&f.app, get("/ui/orchestrations", &cookie)).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let link = format!("/ui/orchestrations/{}/{}", a.tenant_id, a.id);
    assert!(list.contains(&format!("href=\"{link}\"")), "ids are links");
    assert!(
        list.contains(&format!("data-id=\"{}\" class=\"stuck\"", b.id)),
        "{list}"
    );
    assert!(list.contains("1 stuck"));

    let (s, _, page) = send(&f.app, get(&link, &cookie)).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(section(&page, "orch-status", "</td>").contains("running"));
    let state = section(&page, "orch-state", "</pre>");
    assert!(
        state.contains("order") && state.contains(": 7"),
        "the state: {state}"
    );
    assert!(page.contains("id=\"orch-cancel\"") && !page.contains("id=\"orch-resume\""));

    let form = format!(
        "csrf={csrf}&back={link}&orchestration={}/{}&action=signal&name=approved&payload=%7B%22by%22%3A%22ops%22%7D&key=k1",
        a.tenant_id, a.id
    );
    let (s, h, _) = send(&f.app, post("/ui/orchestrations/act", &cookie, &form)).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert!(
        h[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("signal%20approved%20sent")
    );
    let (_, _, page) = send(&f.app, get(&link, &cookie)).await;
    let signals = section(&page, "orch-signals", "</table>");
    assert!(
        signals.contains("approved") && signals.contains("k1"),
        "{signals}"
    );
    // Without CSRF: refused.
    let bad = form.replace(&format!("csrf={csrf}&"), "");
    let (s, _, _) = send(&f.app, post("/ui/orchestrations/act", &cookie, &bad)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    let act = |o: &drover::orchestration::Orchestration, action: &str| {
        format!(
            "csrf={csrf}&back=/ui/orchestrations/{}/{}&orchestration={}/{}&action={action}",
            o.tenant_id, o.id, o.tenant_id, o.id
        )
    };
    let (_, h, _) = send(
        &f.app,
        post("/ui/orchestrations/act", &cookie, &act(&b, "resume")),
    )
    .await;
    assert!(
        h[header::LOCATION].to_str().unwrap().contains("resumed"),
        "{h:?}"
    );
    assert_eq!(
        q.orchestration(b.tenant_id, b.id).await.unwrap().status,
        OrchestrationStatus::Running
    );
    let (_, h, _) = send(
        &f.app,
        post("/ui/orchestrations/act", &cookie, &act(&a, "cancel")),
    )
    .await;
    assert!(
        h[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("cancel%20requested"),
        "{h:?}"
    );
    assert!(
        q.orchestration(a.tenant_id, a.id)
            .await
            .unwrap()
            .cancel_requested
    );
    // Resuming what is not stuck is refused, with a message.
    let (_, h, _) = send(
        &f.app,
        post("/ui/orchestrations/act", &cookie, &act(&a, "resume")),
    )
    .await;
    assert!(
        h[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("resume%20refused")
    );
    let _ = &f.state;
    f.harness.finish().await;
}

/// Actors by name on the lanes and item pages: who paused a lane, who set
/// each limit and rate, who closed a kind (a token's label, `system` for
/// the code's or the queue's own), and on a pending item's page who paused
/// its lane; never a raw UUID.
async fn actors_by_name_on_lanes_and_item(f: Fx) {
    use drover::store::limits::LimitScope;
    let q = &f.queue;
    let (cookie, csrf) = login(&f.app, &f.operator).await;
    let (_, row) = tokens::create(
        q,
        &TokenGrant {
            role: Role::Admin,
            tenant: None,
            enqueue: vec!["*".into()],
            label: "night shift".into(),
            work: vec![],
        },
    )
    .await
    .unwrap();
    let night = Principal {
        actor: row.id,
        ..Principal::system()
    };
    let waiting = put(q, "report.build", "reports").await;
    let (s, _, _) = send(
        &f.app,
        post(
            "/ui/lanes/act",
            &cookie,
            &format!("csrf={csrf}&action=pause&lane=reports"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let (s, _, _) = send(
        &f.app,
        post(
            "/ui/limits/act",
            &cookie,
            &format!("csrf={csrf}&action=set&scope=lane&name=exports&concurrency=3"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    q.limit_declare(&LimitScope::Kind("export".into()), 2)
        .await
        .unwrap();
    q.rate_set(
        &night,
        &LimitScope::Kind("paced".into()),
        drover::store::rates::Rate::per(5, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let until = chrono::Utc::now() + chrono::Duration::hours(1);
    q.close_until(&night, "export", Uuid::nil(), None, until)
        .await
        .unwrap();
    f.live.refresh().await;

    let (s, _, page) = send(&f.app, get("/ui/lanes", &cookie)).await;
    assert_eq!(s, StatusCode::OK);
    let cell = |marker: &str, class: &str| -> String {
        let at = page.find(marker).unwrap_or_else(|| panic!("no {marker}"));
        let row = &page[at..];
        let row = &row[..row.find("</tr>").unwrap()];
        let open = format!("class=\"{class}\">");
        let at = row
            .find(&open)
            .unwrap_or_else(|| panic!("no {class} in {row}"));
        let rest = &row[at + open.len()..];
        rest[..rest.find('<').unwrap()].to_owned()
    };
    assert_eq!(cell("data-lane=\"reports", "lane-by"), "console operator");
    assert_eq!(cell("data-lane=\"exports", "limit-by"), "console operator");
    assert_eq!(cell("data-name=\"export\"", "limit-by"), "system");
    assert_eq!(
        cell("data-rate-scope=\"kind paced", "rate-by"),
        "night shift"
    );
    assert_eq!(
        cell("data-closed-kind=\"export", "closure-by"),
        "night shift"
    );
    assert!(!page.contains(&row.id.to_string()), "no raw token id");

    let (s, _, item) = send(
        &f.app,
        get(&format!("/ui/items/{}/{waiting}", Uuid::nil()), &cookie),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let why = section(&item, "item-waiting", "</ul>");
    assert!(
        why.contains("lane reports paused since") && why.contains("by console operator"),
        "{why}"
    );
    f.harness.finish().await;
}

async fn memory() -> Harness {
    Harness {
        store: Arc::new(drover::store::memory::MemoryStore::new()),
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    }
}

macro_rules! per_backend {
    ($case:ident) => {
        mod $case {
            use super::*;
            #[tokio::test]
            async fn memory() {
                $case(fixture(super::memory().await).await).await;
            }
            #[tokio::test]
            async fn sqlite() {
                $case(fixture(drover::store::sqlite::sqlite_harness().await).await).await;
            }
            #[tokio::test]
            async fn postgres() {
                $case(fixture(drover::testing::pg_harness().await).await).await;
            }
        }
    };
}

per_backend!(overview_alerts_tables_and_history);
per_backend!(workers_show_in_flight_and_running);
per_backend!(schedules_next_runs_and_trigger);
per_backend!(orchestration_detail_and_actions);
per_backend!(schedule_trigger_over_the_api);
per_backend!(actors_by_name_on_lanes_and_item);
