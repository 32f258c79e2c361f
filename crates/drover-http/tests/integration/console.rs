//! The operator's console, as an operator meets it: each case held a
//! defect before its fix (issue 29, point 8).
//!
//! - Every answer of the API carries `X-Content-Type-Options: nosniff`,
//!   refusals and unknown paths included.
//! - `/favicon.ico` answers the dashboard's icon without credentials (it
//!   answered a 401 problem on every page view), and the pages link it.
//! - A `back` link outside the dashboard's own paths (`/ui/../../x`,
//!   encoded dot segments, `//host`) sends the browser to the overview.
//! - A bulk action over a filter without `status` matches only the items
//!   its action changes: "repeat while `more`" ends, and `matched` counts
//!   what it can act on (memory, SQLite, PostgreSQL).
//! - A tenant-scoped token is refused the installation's workers (hosts,
//!   process ids) and schedules by the API and the dashboard alike, and a
//!   dashboard list asked for another tenant is refused as the API refuses
//!   it (memory, PostgreSQL).
//! - One orchestration row that does not decode leaves the listing (with a
//!   warning naming it) instead of failing it: 200 on the API and the page
//!   (SQLite, PostgreSQL, where a row can be damaged).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use drover_http::{Role, TokenSecret};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use uuid::Uuid;

use common::App;

/// One request to the app's router with an optional session cookie; the
/// status, headers and body as text.
async fn raw(
    app: &App,
    method: Method,
    uri: &str,
    cookie: Option<&str>,
    form: Option<String>,
) -> (StatusCode, HeaderMap, String) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "dash.test")
        .header("sec-fetch-site", "same-origin");
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    if form.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let req = req.body(form.map_or_else(Body::empty, Body::from)).unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// Logs `token` in to the dashboard; its cookie and CSRF token.
async fn login(app: &App, token: &TokenSecret) -> (String, String) {
    let (s, h, body) = raw(
        app,
        Method::POST,
        "/ui/login",
        None,
        Some(format!("token={}", token.expose())),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER, "{body}");
    let cookie = h[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (_, _, page) = raw(app, Method::GET, "/ui/items", Some(&cookie), None).await;
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    (cookie, page[at..at + 64].to_owned())
}

#[tokio::test]
async fn every_api_answer_carries_nosniff() {
    let app = common::memory().await;
    let bad = TokenSecret::generate();
    for (uri, token, want) in [
        ("/v1/items", Some(&app.admin), StatusCode::OK),
        ("/v1/items", None, StatusCode::UNAUTHORIZED),
        ("/v1/items", Some(&bad), StatusCode::UNAUTHORIZED),
        ("/v1/nowhere", Some(&app.admin), StatusCode::NOT_FOUND),
        (
            "/v1/items?limit=0",
            Some(&app.admin),
            StatusCode::BAD_REQUEST,
        ),
        ("/healthz", None, StatusCode::OK),
        ("/v1/openapi.json", None, StatusCode::OK),
    ] {
        let (s, h, _) = app.call(Method::GET, uri, token, None, &[]).await;
        assert_eq!(s, want, "{uri}");
        assert_eq!(
            h.get(header::X_CONTENT_TYPE_OPTIONS)
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{uri} ({s})"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn the_icon_answers_without_credentials_and_pages_link_it() {
    let app = common::memory().await;
    for uri in ["/favicon.ico", "/ui/assets/favicon.svg"] {
        let (s, h, body) = raw(&app, Method::GET, uri, None, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {body}");
        assert_eq!(h[header::CONTENT_TYPE], "image/svg+xml", "{uri}");
        assert!(h.get(header::WWW_AUTHENTICATE).is_none(), "{uri}");
        assert!(body.starts_with("<svg"), "{uri}: {body}");
    }
    let (_, _, form) = raw(&app, Method::GET, "/ui/login", None, None).await;
    assert!(
        form.contains("rel=\"icon\" href=\"/ui/assets/favicon.svg\""),
        "{form}"
    );
    let (cookie, _) = login(&app, &app.admin).await;
    let (_, _, page) = raw(&app, Method::GET, "/ui/items", Some(&cookie), None).await;
    assert!(page.contains("rel=\"icon\" href=\"/ui/assets/favicon.svg\""));
    app.finish().await;
}

/// Retries a missing item from a form whose `back` is `back`; where the
/// answer sends the browser.
async fn act_with_back(app: &App, cookie: &str, csrf: &str, back: &str) -> String {
    let form = format!(
        "csrf={csrf}&action=retry&item={}%2F{}&back={}",
        Uuid::nil(),
        Uuid::now_v7(),
        encode(back)
    );
    let (s, h, body) = raw(app, Method::POST, "/ui/items/act", Some(cookie), Some(form)).await;
    assert_eq!(s, StatusCode::SEE_OTHER, "{back:?}: {body}");
    h[header::LOCATION].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_back_link_is_followed_only_to_the_dashboards_own_pages() {
    let app = common::memory().await;
    let (cookie, csrf) = login(&app, &app.admin).await;
    for back in [
        "/ui/../../x",
        "/ui/items/../../../x",
        "/ui/./items",
        "/ui/%2e%2e/x",
        "/ui/%2E%2e/%2e%2E/x",
        "/ui/..%2fx",
        "/ui//evil.example/",
        "/ui/\\evil.example",
        "//evil.example/ui/",
        "https://evil.example/ui/",
        "/uix/items",
        "/ui/items\n",
        "/ui/items#x",
    ] {
        let loc = act_with_back(&app, &cookie, &csrf, back).await;
        assert!(loc.starts_with("/ui/?msg="), "{back:?} went to {loc}");
    }
    for (back, want) in [
        ("/ui/dead?status=failed", "/ui/dead?status=failed&msg="),
        ("/ui/items?error=a%2e%2e", "/ui/items?error=a%2e%2e&msg="),
        ("/ui/", "/ui/?msg="),
        ("/ui/lanes", "/ui/lanes?msg="),
    ] {
        let loc = act_with_back(&app, &cookie, &csrf, back).await;
        assert!(loc.starts_with(want), "{back:?} went to {loc}");
    }
    app.finish().await;
}

/// Percent-encodes a form value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn bulk(app: &App, body: Value) -> Value {
    let (s, h, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(&app.admin),
            Some(body),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    b
}

/// Repeats `body` while the answer says `more`, at most `bound` times;
/// the answers.
async fn until_done(app: &App, body: Value, bound: usize) -> Vec<Value> {
    let mut answers = Vec::new();
    loop {
        let b = bulk(app, body.clone()).await;
        let more = b["more"].as_bool().unwrap();
        answers.push(b);
        if !more {
            return answers;
        }
        assert!(
            answers.len() < bound,
            "still `more` after {bound} calls: {answers:?}"
        );
    }
}

/// Six items; the three newest cancelled. A cancel over every status
/// (no `status` in the filter) matches the three pending ones only, and a
/// loop of two at a time ends; a retry then matches the six cancelled
/// ones, and one filtered to `pending` matches none.
async fn bulk_without_status_matches_what_it_acts_on(app: App) {
    let mut ids = Vec::new();
    for n in 0..6 {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(&app.admin),
                Some(json!({"kind": "bulk.case", "lane": "bulk", "payload": {"n": n}})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    for id in &ids[3..] {
        let (s, _, b) = app
            .call(
                Method::POST,
                &format!("/v1/items/{id}/cancel"),
                Some(&app.admin),
                None,
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
    let filter = json!({"lane": "bulk"});
    let preview = bulk(
        &app,
        json!({"action": "cancel", "filter": filter, "preview": true}),
    )
    .await;
    assert_eq!(
        (preview["matched"].as_u64(), preview["more"].as_bool()),
        (Some(3), Some(false)),
        "the three pending items, not the cancelled ones: {preview}"
    );
    let answers = until_done(
        &app,
        json!({"action": "cancel", "filter": filter, "max": 2}),
        4,
    )
    .await;
    let applied: u64 = answers.iter().map(|a| a["applied"].as_u64().unwrap()).sum();
    let skipped: u64 = answers.iter().map(|a| a["skipped"].as_u64().unwrap()).sum();
    assert_eq!((answers.len(), applied, skipped), (2, 3, 0), "{answers:?}");

    let none = bulk(
        &app,
        json!({"action": "retry", "filter": {"lane": "bulk", "status": "pending"}, "preview": true}),
    )
    .await;
    assert_eq!(
        none["matched"], 0,
        "a retry acts on no pending item: {none}"
    );
    let answers = until_done(
        &app,
        json!({"action": "retry", "filter": filter, "max": 4}),
        4,
    )
    .await;
    let matched: Vec<u64> = answers
        .iter()
        .map(|a| a["matched"].as_u64().unwrap())
        .collect();
    let applied: u64 = answers.iter().map(|a| a["applied"].as_u64().unwrap()).sum();
    assert_eq!((matched, applied), (vec![4, 2], 6), "{answers:?}");
    let (_, _, page) = app
        .call(
            Method::GET,
            "/v1/items?lane=bulk&status=pending",
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 6, "{page}");
    app.finish().await;
}

#[tokio::test]
async fn memory_bulk_without_status() {
    bulk_without_status_matches_what_it_acts_on(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_bulk_without_status() {
    bulk_without_status_matches_what_it_acts_on(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_bulk_without_status() {
    bulk_without_status_matches_what_it_acts_on(common::postgres().await).await;
}

/// A worker on host `secret-host-7` and pid 4242; a tenant's token and
/// another tenant's item. The tenant's token reads neither the workers nor
/// the schedules, over the API or on the pages, and a list asked for the
/// other tenant is refused on both; the unscoped token reads them all.
async fn installation_data_only_for_unscoped_tokens(app: App) {
    let now = app.harness.store.db_now().await.unwrap();
    app.harness
        .store
        .worker_beat(&drover::store::WorkerRow {
            id: "w-console".into(),
            host: "secret-host-7".into(),
            pid: 4242,
            lanes: vec!["default".into()],
            capacity: 1,
            started_at: now,
            last_beat_at: now,
            state: "running".into(),
            beat_interval_ms: 60_000,
            kinds: vec![],
            version: String::new(),
        })
        .await
        .unwrap();
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let scoped = app.token(Role::Operator, Some(a), &["*"]).await;
    let mut own = Vec::new();
    for (tenant, kind) in [(a, "a.own"), (b, "b.other")] {
        let (s, _, body) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(&app.admin),
                Some(json!({"kind": kind, "tenant": tenant})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        own.push(body["id"].as_str().unwrap().to_owned());
    }
    let (a_item, b_item) = (own[0].clone(), own[1].clone());

    for path in ["/v1/workers", "/v1/schedules"] {
        let (s, _, body) = app.call(Method::GET, path, Some(&scoped), None, &[]).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}: {body}");
        let (s, _, body) = app
            .call(Method::GET, path, Some(&app.admin), None, &[])
            .await;
        assert_eq!(s, StatusCode::OK, "{path}: {body}");
    }
    let (_, _, workers) = app
        .call(Method::GET, "/v1/workers", Some(&app.admin), None, &[])
        .await;
    assert_eq!(workers[0]["host"], "secret-host-7", "{workers}");
    let (s, _, body) = app
        .call(
            Method::GET,
            &format!("/v1/items?tenant={b}"),
            Some(&scoped),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");

    let (cookie, _) = login(&app, &scoped).await;
    for path in ["/ui/workers", "/ui/schedules"] {
        let (s, _, page) = raw(&app, Method::GET, path, Some(&cookie), None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}");
        assert!(
            !page.contains("secret-host-7") && !page.contains("4242"),
            "{path}: {page}"
        );
        assert!(page.contains("installation-wide"), "{path}: {page}");
    }
    let (s, _, page) = raw(
        &app,
        Method::GET,
        &format!("/ui/items?tenant={b}"),
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{page}");
    assert!(page.contains("scoped to another tenant"), "{page}");
    assert!(!page.contains(&a_item) && !page.contains(&b_item), "{page}");
    let (s, _, page) = raw(
        &app,
        Method::GET,
        &format!("/ui/items?tenant={a}"),
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains(&a_item) && !page.contains(&b_item), "{page}");

    let (cookie, _) = login(&app, &app.admin).await;
    let (s, _, page) = raw(&app, Method::GET, "/ui/workers", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        page.contains("secret-host-7") && page.contains("4242"),
        "{page}"
    );
    let (s, _, _) = raw(&app, Method::GET, "/ui/schedules", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    app.finish().await;
}

#[tokio::test]
async fn memory_installation_data_only_for_unscoped_tokens() {
    installation_data_only_for_unscoped_tokens(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_installation_data_only_for_unscoped_tokens() {
    installation_data_only_for_unscoped_tokens(common::postgres().await).await;
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Two orchestrations, one damaged by `damage` (raw SQL on its history);
/// the listing answers the other over the API and on the page, and a
/// warning names the damaged one. Runs on the test's one thread, where the
/// capturing subscriber is the default.
async fn an_undecodable_orchestration_leaves_the_listing<F, Fut>(app: App, damage: F)
where
    F: FnOnce(Uuid) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let mut ids = Vec::new();
    for n in 0..2 {
        let start = drover::orchestration::Start {
            kind: "console.flow".into(),
            tenant_id: Uuid::nil(),
            state: json!({"n": n}),
            first_step: "first".into(),
            lane: "default".into(),
            max_attempts: 3,
            idempotency_key: None,
        };
        ids.push(app.queue.start(&start).await.unwrap().record.id);
    }
    let (good, bad) = (ids[0], ids[1]);
    damage(bad).await;

    let (s, _, list) = app
        .call(
            Method::GET,
            "/v1/orchestrations",
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let listed: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![good.to_string()], "{list}");
    let (cookie, _) = login(&app, &app.admin).await;
    let (s, _, page) = raw(&app, Method::GET, "/ui/orchestrations", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(page.contains(&good.to_string()) && !page.contains(&bad.to_string()));
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("does not decode") && logs.contains(&bad.to_string()),
        "a warning names the row: {logs}"
    );
    app.finish().await;
}

const DAMAGED_HISTORY: &str = r#"[{"not": "a history entry"}]"#;

#[tokio::test]
async fn sqlite_undecodable_orchestration() {
    use drover::store::Store;
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orch.db");
    let store = SqliteStore::open(&path.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let store = Arc::new(store);
    let writer = store.clone();
    let app = App::over(drover::store::contract::Harness {
        store,
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    })
    .await;
    an_undecodable_orchestration_leaves_the_listing(app, |id| async move {
        let n = sqlx::query("UPDATE orchestrations SET history = ? WHERE id = ?")
            .bind(DAMAGED_HISTORY)
            .bind(id)
            .execute(writer.writer())
            .await
            .unwrap()
            .rows_affected();
        assert_eq!(n, 1);
    })
    .await;
}

#[tokio::test]
async fn postgres_undecodable_orchestration() {
    use sqlx::Connection;
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let app = App::over(drover::store::contract::Harness {
        store,
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    })
    .await;
    let damage_url = url.clone();
    let damage_schema = schema.clone();
    an_undecodable_orchestration_leaves_the_listing(app, |id| async move {
        let mut conn = sqlx::PgConnection::connect(&damage_url).await.unwrap();
        let n = sqlx::query(&format!(
            "UPDATE \"{damage_schema}\".orchestrations SET history = $1::jsonb WHERE id = $2"
        ))
        .bind(DAMAGED_HISTORY)
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap()
        .rows_affected();
        assert_eq!(n, 1);
        conn.close().await.unwrap();
    })
    .await;
    drover::testing::pg_drop_schema(&url, &schema).await;
}
