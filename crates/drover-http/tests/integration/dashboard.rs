//! The dashboard over a real queue (memory and PostgreSQL): closed without
//! a session, login by token into a strict cookie, CSRF on every POST, a
//! strict CSP, filters, the item page with its fencing number and redacted
//! payload, retry and cancel, lane pause, and one shared refresh for every
//! live tab.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use drover::queue::{Principal, Queue};
use drover::{NewItem, Status};
use drover_http::dashboard::{
    self, CSP, DashState, DashboardConfig, live::Live, session::Sessions,
};
use drover_http::{ApiPrincipal, AppState, Auth, HttpConfig, Role, TokenSecret};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;
use uuid::Uuid;

struct Fixture {
    app: Router,
    queue: Queue,
    live: Arc<Live>,
    operator: TokenSecret,
    viewer: TokenSecret,
}

fn principal(role: Role) -> ApiPrincipal {
    ApiPrincipal {
        token_id: Uuid::now_v7(),
        role,
        tenant: None,
        enqueue: vec!["*".into()],
        work: vec![],
    }
}

fn fixture(queue: Queue) -> Fixture {
    let operator = TokenSecret::generate();
    let viewer = TokenSecret::generate();
    let auth = Auth::deny_all()
        .with_token(&operator, principal(Role::Operator))
        .with_token(&viewer, principal(Role::Viewer));
    fixture_with(queue, auth, operator, viewer)
}

/// A dashboard whose tokens live in the store's token table (as `drover
/// serve` runs it), with an operator and a viewer token minted there.
async fn fixture_over_table(queue: Queue) -> Fixture {
    let mint = |role| drover_http::tokens::TokenGrant {
        role,
        tenant: None,
        enqueue: vec!["*".into()],
        label: "dashboard test".into(),
        work: vec![],
    };
    let (operator, _) = drover_http::tokens::create(&queue, &mint(Role::Operator))
        .await
        .unwrap();
    let (viewer, _) = drover_http::tokens::create(&queue, &mint(Role::Viewer))
        .await
        .unwrap();
    let auth = drover_http::tokens::auth_from_store(&queue).await.unwrap();
    fixture_with(queue, auth, operator, viewer)
}

fn fixture_with(queue: Queue, auth: Auth, operator: TokenSecret, viewer: TokenSecret) -> Fixture {
    let mut redact = BTreeMap::new();
    redact.insert("mail.send".to_owned(), vec!["password".to_owned()]);
    let config = DashboardConfig {
        redact,
        live_interval: Duration::from_secs(3600),
        ..DashboardConfig::default()
    };
    let live = Live::new(queue.clone(), config.live_interval);
    let app_state = AppState {
        live: live.clone(),
        queue: queue.clone(),
        auth: auth.clone(),
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
    Fixture {
        app: dashboard::routes_with(state),
        queue,
        live,
        operator,
        viewer,
    }
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(app: &Router, req: Request<Body>) -> Reply {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path).header(header::HOST, "dash.test");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::empty()).unwrap()
}

fn post(path: &str, cookie: Option<&str>, form: &str) -> Request<Body> {
    let mut b = Request::post(path)
        .header(header::HOST, "dash.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::from(form.to_owned())).unwrap()
}

/// Logs in; returns the cookie and the session's CSRF token.
async fn login(f: &Fixture, secret: &TokenSecret) -> (String, String) {
    let r = send(
        &f.app,
        post("/ui/login", None, &format!("token={}", secret.expose())),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let set = r.headers[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let page = send(&f.app, get("/ui/items", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    let at = page
        .body
        .find("name=\"csrf\" value=\"")
        .expect("a csrf field")
        + 19;
    let csrf = page.body[at..at + 64].to_owned();
    (cookie, csrf)
}

async fn put(q: &Queue, kind: &str, lane: &str, payload: serde_json::Value) -> Uuid {
    q.enqueue_item(
        &Principal::system(),
        NewItem::new(kind, payload).with_lane(lane),
    )
    .await
    .unwrap()
    .item
    .id
}

async fn put_failed(q: &Queue, lane: &str, error: &str) -> Uuid {
    let id = put(q, "report.build", lane, json!({"n": 1})).await;
    let batch = q
        .claim(lane, &[], "w-test", Duration::from_secs(30), 10)
        .await
        .unwrap();
    let cx = batch.items.into_iter().find(|c| c.id() == id).unwrap();
    q.fail(&cx, error, true).await.unwrap();
    id
}

async fn closed_by_default_and_strict(f: &Fixture) {
    for path in [
        "/ui/",
        "/ui/items",
        "/ui/dead",
        "/ui/lanes",
        "/ui/workers",
        "/ui/schedules",
        "/ui/orchestrations",
        "/ui/batches",
        "/ui/live",
    ] {
        let r = send(&f.app, get(path, None)).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path} without a session");
        assert!(
            r.headers[header::LOCATION]
                .to_str()
                .unwrap()
                .ends_with("/ui/login")
        );
    }
    let bogus = send(&f.app, get("/ui/items", Some("drover_session=deadbeef"))).await;
    assert_eq!(
        bogus.status,
        StatusCode::SEE_OTHER,
        "an unknown session is none"
    );
    let form = send(&f.app, get("/ui/login", None)).await;
    assert_eq!(
        form.status,
        StatusCode::UNAUTHORIZED,
        "the login form is not a 2xx"
    );
    assert_eq!(form.headers[header::CONTENT_SECURITY_POLICY], CSP);
    for path in ["/ui/items/act", "/ui/lanes/act", "/ui/logout"] {
        let r = send(&f.app, post(path, None, "action=retry")).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{path} without a session"
        );
    }
    let wrong = send(&f.app, post("/ui/login", None, "token=not-a-token")).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.headers.get(header::SET_COOKIE).is_none());
    // A cross-site login POST is refused before the token is looked at.
    let cross = Request::post("/ui/login")
        .header(header::HOST, "dash.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ORIGIN, "http://evil.example")
        .body(Body::from(format!("token={}", f.operator.expose())))
        .unwrap();
    assert_eq!(send(&f.app, cross).await.status, StatusCode::FORBIDDEN);
}

async fn pages_filters_and_operations(f: &Fixture) {
    let q = &f.queue;
    let failed = put_failed(q, "reports", "disk full on /var").await;
    let other_failed = put_failed(q, "reports", "timeout talking to smtp").await;
    let pending = put(
        q,
        "mail.send",
        "mail",
        json!({"to": "a@example.com", "password": "hunter2"}),
    )
    .await;
    let (cookie, csrf) = login(f, &f.operator).await;

    let overview = send(&f.app, get("/ui/", Some(&cookie))).await;
    assert_eq!(overview.status, StatusCode::OK);
    assert_eq!(overview.headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert!(overview.body.contains("id=\"lane-counts\"") && overview.body.contains(">reports<"));
    assert!(overview.body.contains("<svg"), "charts are drawn");
    for (i, chunk) in overview.body.split("<script").skip(1).enumerate() {
        assert!(
            chunk.trim_start().starts_with("src="),
            "script {i} is a file, never inline"
        );
    }

    // Filters: status and text in the last error.
    let list = send(
        &f.app,
        get("/ui/items?status=failed&error=DISK", Some(&cookie)),
    )
    .await;
    assert!(list.body.contains(&failed.to_string()));
    assert!(!list.body.contains(&other_failed.to_string()));
    assert!(!list.body.contains(&pending.to_string()));
    let bad = send(&f.app, get("/ui/items?status=bogus", Some(&cookie))).await;
    assert!(
        bad.body.contains("status: unknown"),
        "a bad filter is named"
    );
    let dead = send(&f.app, get("/ui/dead", Some(&cookie))).await;
    assert!(
        dead.body.contains(&failed.to_string()) && dead.body.contains(&other_failed.to_string())
    );
    assert!(!dead.body.contains(&pending.to_string()));

    // The item page: fencing number, error, redacted payload.
    let page = send(
        &f.app,
        get(
            &format!("/ui/items/{}/{failed}", Uuid::nil()),
            Some(&cookie),
        ),
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("disk full on /var"));
    assert!(page.body.contains("fencing number"));
    let mail = send(
        &f.app,
        get(
            &format!("/ui/items/{}/{pending}", Uuid::nil()),
            Some(&cookie),
        ),
    )
    .await;
    assert!(mail.body.contains("[redacted]") && !mail.body.contains("hunter2"));
    assert!(mail.body.contains("a@example.com"));
    assert!(
        mail.body.contains("id=\"item-progress\">-<"),
        "no progress yet"
    );
    assert!(!mail.body.contains("id=\"result\""), "no result yet");

    // Progress and the result, on a done item's page.
    let done = put(q, "report.build", "results", json!({"n": 2})).await;
    let batch = q
        .claim("results", &[], "w-test", Duration::from_secs(30), 1)
        .await
        .unwrap();
    let cx = batch.items.into_iter().next().unwrap();
    cx.report_progress(drover::item::Progress {
        value: Some(40.0),
        data: Some(json!({"cursor": 7})),
    })
    .await
    .unwrap();
    q.complete_with(&cx, Some(&json!({"rows": 12})))
        .await
        .unwrap();
    let page = send(
        &f.app,
        get(&format!("/ui/items/{}/{done}", Uuid::nil()), Some(&cookie)),
    )
    .await;
    // Escaped as every value on the page is (askama writes `"` as `&#34;`).
    let esc = |s: &str| s.replace('"', "&#34;");
    assert!(
        page.body.contains(&format!(
            "id=\"item-progress\">{}<",
            esc(r#"40 %, {"cursor":7}"#)
        )),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(&format!(
            "<pre id=\"result\">{}",
            esc("{\n  \"rows\": 12\n}")
        )),
        "{}",
        page.body
    );
    let missing = send(
        &f.app,
        get(
            &format!("/ui/items/{}/{}", Uuid::nil(), Uuid::now_v7()),
            Some(&cookie),
        ),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Retry without the CSRF token: refused, nothing changes.
    let item_field = format!("item={}%2F{failed}", Uuid::nil());
    let no_token = send(
        &f.app,
        post(
            "/ui/items/act",
            Some(&cookie),
            &format!("action=retry&{item_field}"),
        ),
    )
    .await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    assert_eq!(
        q.get(Uuid::nil(), failed).await.unwrap().status,
        Status::Failed
    );
    // Cross-site with the right token: refused too.
    let cross = Request::post("/ui/items/act")
        .header(header::HOST, "dash.test")
        .header(header::COOKIE, &cookie)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "cross-site")
        .body(Body::from(format!("csrf={csrf}&action=retry&{item_field}")))
        .unwrap();
    assert_eq!(send(&f.app, cross).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        q.get(Uuid::nil(), failed).await.unwrap().status,
        Status::Failed
    );
    // With it: retried, audited with the token as actor.
    let ok = send(
        &f.app,
        post(
            "/ui/items/act",
            Some(&cookie),
            &format!("csrf={csrf}&action=retry&back=%2Fui%2Fdead&{item_field}"),
        ),
    )
    .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    let loc = ok.headers[header::LOCATION].to_str().unwrap();
    assert!(loc.starts_with("/ui/dead?msg=retried%201"), "{loc}");
    assert_eq!(
        q.get(Uuid::nil(), failed).await.unwrap().status,
        Status::Pending
    );
    let audit = q.audit(Uuid::nil(), failed).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.action == "retry" && !a.actor.is_nil())
    );
    // Bulk cancel of two: the pending one cancels, and so does the dead
    // letter (discarded); a second cancel of either is refused.
    let both = format!(
        "csrf={csrf}&action=cancel&item={n}%2F{pending}&item={n}%2F{other_failed}&back=https%3A%2F%2Fevil.example%2F",
        n = Uuid::nil()
    );
    let r = send(&f.app, post("/ui/items/act", Some(&cookie), &both)).await;
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.starts_with("/ui/?msg=cancelled%202"),
        "never an open redirect: {loc}"
    );
    for id in [pending, other_failed] {
        assert_eq!(
            q.get(Uuid::nil(), id).await.unwrap().status,
            Status::Cancelled
        );
    }
    let again = format!(
        "csrf={csrf}&action=cancel&item={n}%2F{pending}&back=%2Fui%2F",
        n = Uuid::nil()
    );
    let r = send(&f.app, post("/ui/items/act", Some(&cookie), &again)).await;
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.starts_with("/ui/?msg=cancelled%200%2C%201%20refused"),
        "refused: {loc}"
    );

    // Lanes: pause and resume through the form.
    let r = send(
        &f.app,
        post(
            "/ui/lanes/act",
            Some(&cookie),
            &format!("csrf={csrf}&action=pause&lane=reports"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(q.lanes_paused().await.unwrap(), vec!["reports".to_owned()]);
    let lanes = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    assert!(
        lanes.body.contains("data-lane=\"reports\"") && lanes.body.contains("class=\"paused\"")
    );
    assert!(lanes.body.contains("value=\"resume\""));
    send(
        &f.app,
        post(
            "/ui/lanes/act",
            Some(&cookie),
            &format!("csrf={csrf}&action=resume&lane=reports"),
        ),
    )
    .await;
    assert!(q.lanes_paused().await.unwrap().is_empty());

    for path in ["/ui/workers", "/ui/schedules", "/ui/orchestrations"] {
        assert_eq!(
            send(&f.app, get(path, Some(&cookie))).await.status,
            StatusCode::OK,
            "{path}"
        );
    }

    // A viewer reads but may not operate.
    let (vcookie, vcsrf) = login(f, &f.viewer).await;
    let r = send(
        &f.app,
        post(
            "/ui/lanes/act",
            Some(&vcookie),
            &format!("csrf={vcsrf}&action=pause&lane=mail"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(q.lanes_paused().await.unwrap().is_empty());
    // Another session's token does not pass.
    let r = send(
        &f.app,
        post(
            "/ui/lanes/act",
            Some(&vcookie),
            &format!("csrf={csrf}&action=pause&lane=mail"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);

    // Logout ends the session.
    let r = send(
        &f.app,
        post("/ui/logout", Some(&cookie), &format!("csrf={csrf}")),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(
        send(&f.app, get("/ui/", Some(&cookie))).await.status,
        StatusCode::SEE_OTHER
    );
}

/// The text of the table row `marker` opens (up to its `</tr>`).
fn row_of<'a>(body: &'a str, marker: &str) -> &'a str {
    let at = body
        .find(marker)
        .unwrap_or_else(|| panic!("no row {marker}:\n{body}"));
    let rest = &body[at..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

/// A limit row shows this concurrency, use, waiting count and source.
fn shows(row: &str, concurrency: u32, in_use: u64, waiting: u64, source: &str) -> bool {
    [
        format!("limit-concurrency\">{concurrency}<"),
        format!("limit-in-use\">{in_use}<"),
        format!("limit-waiting\">{waiting}<"),
        format!("limit-source\">{source}<"),
    ]
    .iter()
    .all(|s| row.contains(s.as_str()))
}

/// The lanes page lists the limits in force with their use (a lane's in
/// its lane's row, a kind's in the kind table); an operator sets and
/// clears one through the page's form (CSRF checked); a viewer sees them
/// with no form and is refused; so is an operator scoped to a tenant.
async fn limits_on_the_lanes_page(f: &Fixture) {
    use drover::store::limits::LimitScope;
    let q = &f.queue;
    let export = LimitScope::Kind("export".into());
    q.limit_declare(&export, 1).await.unwrap();
    for _ in 0..3 {
        put(q, "export", "exports", json!({})).await;
    }
    let batch = q
        .claim("exports", &[], "w-test", Duration::from_secs(30), 10)
        .await
        .unwrap();
    assert_eq!(batch.items.len(), 1, "the kind limit admits one");
    // The lane's counts are in the shared snapshot from now on.
    f.live.refresh().await;
    let (cookie, csrf) = login(f, &f.operator).await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    let kind_row = row_of(&page.body, "data-scope=\"kind\" data-name=\"export\"");
    assert!(shows(kind_row, 1, 1, 2, "code"), "{kind_row}");
    assert!(
        !kind_row.contains("limit-clear"),
        "a code limit is not cleared here"
    );
    assert!(page.body.contains("id=\"limit-set\""));
    let act = |form: String| send(&f.app, post("/ui/limits/act", Some(&cookie), &form));

    // Without the CSRF token: refused, nothing set.
    let r = act("action=set&scope=lane&name=exports&concurrency=3".into()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(q.limits().await.unwrap().len(), 1);
    // A lane limit, beside its lane.
    let r = act(format!(
        "csrf={csrf}&action=set&scope=lane&name=exports&concurrency=3"
    ))
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert_eq!(
        loc,
        "/ui/lanes?msg=limit%20on%20lane%20exports%20set%20to%203"
    );
    // The operator's kind limit wins over the code's.
    act(format!(
        "csrf={csrf}&action=set&scope=kind&name=export&concurrency=2"
    ))
    .await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let lane_row = row_of(&page.body, "data-lane=\"exports\"");
    assert!(shows(lane_row, 3, 1, 2, "operator"), "{lane_row}");
    assert!(lane_row.contains("limit-clear"));
    let kind_row = row_of(&page.body, "data-scope=\"kind\" data-name=\"export\"");
    assert!(shows(kind_row, 2, 1, 2, "operator"), "{kind_row}");
    // An ordered group that holds on a dead letter, shown as such.
    let r = act(format!(
        "csrf={csrf}&action=set&scope=group&name=chain&concurrency=1&order=hold"
    ))
    .await;
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.ends_with("set%20to%201%20ordered%2C%20on%20dead%20letter%20hold"),
        "{loc}"
    );
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let chain = row_of(&page.body, "data-scope=\"group\" data-name=\"chain\"");
    assert!(chain.contains("ordered, on dead letter hold"), "{chain}");
    act(format!("csrf={csrf}&action=clear&scope=group&name=chain")).await;
    // Refused input changes nothing and says why.
    for bad in [
        "scope=kind&name=export&concurrency=1&order=hold",
        "scope=group&name=chain&concurrency=2&order=continue",
        "scope=group&name=chain&concurrency=1&order=skip",
        "scope=kind&name=export&concurrency=0",
        "scope=kind&name=export&concurrency=many",
        "scope=tenant&name=export&concurrency=2",
        "scope=kind&name=Bad%20Name&concurrency=2",
    ] {
        let r = act(format!("csrf={csrf}&action=set&{bad}")).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{bad}");
        let loc = r.headers[header::LOCATION].to_str().unwrap();
        assert!(loc.starts_with("/ui/lanes?msg="), "{bad}: {loc}");
    }
    let mut in_force: Vec<(String, u32)> = q
        .limits()
        .await
        .unwrap()
        .into_iter()
        .map(|u| (u.setting.scope.to_string(), u.setting.concurrency))
        .collect();
    in_force.sort();
    assert_eq!(
        in_force,
        vec![("kind export".into(), 2), ("lane exports".into(), 3)]
    );
    // Cleared: the code's limit is in force again; the lane has none.
    let r = act(format!("csrf={csrf}&action=clear&scope=kind&name=export")).await;
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.ends_with("msg=operator%20limit%20on%20kind%20export%20cleared"),
        "{loc}"
    );
    act(format!("csrf={csrf}&action=clear&scope=lane&name=exports")).await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let kind_row = row_of(&page.body, "data-scope=\"kind\" data-name=\"export\"");
    assert!(shows(kind_row, 1, 1, 2, "code"), "{kind_row}");
    let lane_row = row_of(&page.body, "data-lane=\"exports\"");
    assert!(!lane_row.contains("limit-concurrency"), "{lane_row}");

    // A viewer sees the limits, has no form, and may not set one.
    let (vcookie, vcsrf) = login(f, &f.viewer).await;
    let page = send(&f.app, get("/ui/lanes", Some(&vcookie))).await;
    assert!(shows(
        row_of(&page.body, "data-scope=\"kind\" data-name=\"export\""),
        1,
        1,
        2,
        "code"
    ));
    assert!(!page.body.contains("id=\"limit-set\""));
    let r = send(
        &f.app,
        post(
            "/ui/limits/act",
            Some(&vcookie),
            &format!("csrf={vcsrf}&action=set&scope=kind&name=export&concurrency=9"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // An operator scoped to a tenant: refused, as over HTTP.
    let scoped = TokenSecret::generate();
    let auth = Auth::deny_all().with_token(
        &scoped,
        ApiPrincipal {
            tenant: Some(Uuid::now_v7()),
            ..principal(Role::Operator)
        },
    );
    let tf = fixture_with(q.clone(), auth, scoped.clone(), scoped);
    let (tcookie, tcsrf) = login(&tf, &tf.operator).await;
    let r = send(
        &tf.app,
        post(
            "/ui/limits/act",
            Some(&tcookie),
            &format!("csrf={tcsrf}&action=set&scope=kind&name=export&concurrency=9"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(q.limits().await.unwrap()[0].setting.concurrency, 1);
    // A closed group, listed with a reopen button that reopens it.
    let until = chrono::Utc::now() + chrono::Duration::hours(1);
    q.close_until(
        &drover::queue::Principal::system(),
        "export",
        Uuid::nil(),
        Some("g1"),
        until,
    )
    .await
    .unwrap();
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let closed = row_of(
        &page.body,
        "data-closed-kind=\"export\" data-closed-group=\"g1\"",
    );
    assert!(
        closed.contains("closure-reopen") && closed.contains("class=\"closure-by\">system<"),
        "{closed}"
    );
    let r = act(format!(
        "csrf={csrf}&action=reopen&scope=kind&name=export&group=g1&tenant={}",
        Uuid::nil()
    ))
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.ends_with("group%20g1%20of%20kind%20export%20reopened"),
        "{loc}"
    );
    assert!(q.closures().await.unwrap().is_empty());
    // A rate in force, with its burst and next start: one start of 1/1h
    // taken, the next an hour on.
    q.rate_set(
        &Principal::system(),
        &LimitScope::KindPerGroup("paced".into()),
        drover::store::rates::Rate::per(1, std::time::Duration::from_secs(3_600)).with_burst(2),
    )
    .await
    .unwrap();
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let rate = row_of(&page.body, "data-rate-scope=\"kind paced per group\"");
    assert!(
        rate.contains("<td>1/1h</td><td>2</td><td>now</td><td>0</td><td>operator</td>"),
        "{rate}"
    );
    for _ in 0..3 {
        q.enqueue_item(
            &Principal::system(),
            NewItem::new("paced", serde_json::json!({}))
                .with_group("g")
                .with_lane("paced"),
        )
        .await
        .unwrap();
    }
    let claimed = q
        .store()
        .item_claim(&drover::store::ClaimParams {
            lane: "paced".into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: std::time::Duration::from_secs(60),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2, "the burst");
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let rate = row_of(&page.body, "data-rate-scope=\"kind paced per group\"");
    assert!(
        !rate.contains("<td>now</td>") && rate.contains("<td>1</td><td>operator</td>"),
        "held back until its next start: {rate}"
    );
    q.rate_clear(
        &Principal::system(),
        &LimitScope::KindPerGroup("paced".into()),
    )
    .await
    .unwrap();
    // Each tenant's fair share of a lane: weight, waiting, started.
    let (a, b) = (Uuid::from_u128(0xA), Uuid::from_u128(0xB));
    q.fair_weight_set(&Principal::system(), a, 3).await.unwrap();
    for t in [a, a, b] {
        let it = NewItem::new("shared.job", serde_json::json!({}))
            .with_lane("shared")
            .with_tenant(t);
        q.store().item_insert(&it).await.unwrap();
    }
    let claimed = q
        .store()
        .item_claim(&drover::store::ClaimParams {
            lane: "shared".into(),
            kinds: vec!["shared.job".into()],
            worker_id: "w".into(),
            lease: std::time::Duration::from_secs(60),
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    // The shares are the live view's (one interval old at most): read them
    // now.
    f.live.refresh().await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    let share = row_of(
        &page.body,
        &format!("data-share-lane=\"shared\" data-share-tenant=\"{a}\""),
    );
    assert!(
        share.contains("<td>3</td><td>1</td><td>1</td><td>by tenant</td>"),
        "weight 3, one waiting, one started: {share}"
    );
    // Every view within the interval shares that read; the next refresh
    // reads again.
    let it = NewItem::new("shared.job", serde_json::json!({}))
        .with_lane("shared")
        .with_tenant(a);
    q.store().item_insert(&it).await.unwrap();
    let row = format!("data-share-lane=\"shared\" data-share-tenant=\"{a}\"");
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    assert!(
        row_of(&page.body, &row).contains("<td>3</td><td>1</td><td>1</td>"),
        "the interval's read: {}",
        row_of(&page.body, &row)
    );
    f.live.refresh().await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    assert!(
        row_of(&page.body, &row).contains("<td>3</td><td>2</td><td>1</td>"),
        "read again after the refresh: {}",
        row_of(&page.body, &row)
    );
    // A lane shared by group says so.
    q.fair_lane_mode_set(&Principal::system(), "shared", true, true)
        .await
        .unwrap();
    f.live.refresh().await;
    let page = send(&f.app, get("/ui/lanes", Some(&cookie))).await;
    assert!(
        row_of(&page.body, &row).contains("<td>by group</td>"),
        "the lane's mode: {}",
        row_of(&page.body, &row)
    );
}

/// Every open tab shares one query set per refresh.
async fn batches_page_shows_progress(f: &Fixture) {
    let q = &f.queue;
    let system = drover::queue::Principal::system();
    let id = Uuid::now_v7();
    q.batch_create(&system, drover::queue::BatchSpec::new(id, "report.ready"))
        .await
        .unwrap();
    for _ in 0..2 {
        q.enqueue_item(
            &system,
            drover::NewItem::new("step", serde_json::json!({})).with_batch(id),
        )
        .await
        .unwrap();
    }
    q.batch_seal(Uuid::nil(), id).await.unwrap();
    let (cookie, _) = login(f, &f.viewer).await;
    let r = send(&f.app, get("/ui/batches", Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.contains(&id.to_string()), "{}", r.body);
    assert!(
        r.body.contains("0/2") && r.body.contains("sealed"),
        "{}",
        r.body
    );
}

async fn live_tabs_share_one_refresh(f: &Fixture) {
    let mut a = f.live.subscribe();
    let mut b = f.live.subscribe();
    let before = f.live.refreshes();
    f.live.refresh().await;
    let (sa, sb) = (a.recv().await.unwrap(), b.recv().await.unwrap());
    assert!(Arc::ptr_eq(&sa, &sb), "both tabs get the same snapshot");
    assert_eq!(f.live.refreshes(), before + 1, "one query set for two tabs");
}

/// A revoked token's dashboard sessions end at once, in every `serve`
/// process sharing the token table (two routers over one store here, each
/// with its own sessions): the next GET goes to the login form and the next
/// POST is refused, though the cookie is well within its lifetime.
async fn revoking_a_token_ends_its_sessions(queue: Queue) {
    let a = fixture_over_table(queue.clone()).await;
    let (cookie_a, csrf_a) = login(&a, &a.operator).await;
    // A second process: the same store, its own sessions.
    let b = fixture_with(
        queue.clone(),
        drover_http::tokens::auth_from_store(&queue).await.unwrap(),
        a.operator.clone(),
        a.viewer.clone(),
    );
    let (cookie_b, csrf_b) = login(&b, &b.operator).await;
    let (viewer_cookie, _) = login(&a, &a.viewer).await;
    let failed = put_failed(&queue, "reports", "disk full").await;

    let hash = a.operator.hash().to_hex();
    let row = queue.store().token_by_hash(&hash).await.unwrap().unwrap();
    assert!(queue.store().token_revoke(row.id).await.unwrap());

    for (f, cookie, csrf) in [(&a, &cookie_a, &csrf_a), (&b, &cookie_b, &csrf_b)] {
        let page = send(&f.app, get("/ui/items", Some(cookie))).await;
        assert_eq!(
            page.status,
            StatusCode::SEE_OTHER,
            "GET after revoke: {}",
            page.body
        );
        assert!(
            page.headers[header::LOCATION]
                .to_str()
                .unwrap()
                .ends_with("/ui/login")
        );
        let act = send(
            &f.app,
            post(
                "/ui/items/act",
                Some(cookie),
                &format!("csrf={csrf}&action=retry&item={}%2F{failed}", Uuid::nil()),
            ),
        )
        .await;
        assert_eq!(
            act.status,
            StatusCode::UNAUTHORIZED,
            "POST after revoke: {}",
            act.body
        );
    }
    assert_eq!(
        queue.get(Uuid::nil(), failed).await.unwrap().status,
        Status::Failed,
        "the revoked session changed nothing"
    );
    let still = send(&a.app, get("/ui/items", Some(&viewer_cookie))).await;
    assert_eq!(
        still.status,
        StatusCode::OK,
        "another token's session is untouched"
    );
    assert!(
        login_refused(&a, &a.operator).await,
        "the revoked token cannot log in again"
    );
}

async fn login_refused(f: &Fixture, secret: &TokenSecret) -> bool {
    let r = send(
        &f.app,
        post("/ui/login", None, &format!("token={}", secret.expose())),
    )
    .await;
    r.status == StatusCode::UNAUTHORIZED
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_revoke_ends_sessions() {
    revoking_a_token_ends_its_sessions(Queue::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_revoke_ends_sessions() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    revoking_a_token_ends_its_sessions(Queue::new(store)).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_dashboard() {
    let f = fixture(Queue::memory());
    closed_by_default_and_strict(&f).await;
    pages_filters_and_operations(&f).await;
    limits_on_the_lanes_page(&f).await;
    batches_page_shows_progress(&f).await;
    live_tabs_share_one_refresh(&f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_dashboard() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let f = fixture(Queue::new(store));
    closed_by_default_and_strict(&f).await;
    pages_filters_and_operations(&f).await;
    limits_on_the_lanes_page(&f).await;
    batches_page_shows_progress(&f).await;
    live_tabs_share_one_refresh(&f).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_dashboard() {
    use drover::store::Store;
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dash.db");
    let store = SqliteStore::open(&path.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let f = fixture(Queue::new(Arc::new(store)));
    closed_by_default_and_strict(&f).await;
    pages_filters_and_operations(&f).await;
    limits_on_the_lanes_page(&f).await;
    batches_page_shows_progress(&f).await;
    live_tabs_share_one_refresh(&f).await;
}
