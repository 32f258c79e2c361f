//! The operator's console around one item (issue 29): the attempt history
//! on `GET /v1/items/{id}` and the item page, runs and failures as two
//! numbers, actors by token label or `system`, actions by status, why a
//! pending item waits; lists that fit (short ids with copy, relative times,
//! priority and run-at columns, payload preview, previous and next pages,
//! a total when cheap); the dead letter grouped by kind and normalised
//! error with "retry all in this group" (memory, SQLite, PostgreSQL).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use drover::store::{ClaimParams, ClaimRef, FailParams};
use drover::{NewItem, Status};
use drover_http::TokenSecret;
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;
use uuid::Uuid;

use common::App;

/// One request to the app's router with an optional session cookie and
/// form; the status, headers and body as text.
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

/// Logs `token` in; the session cookie and the CSRF token.
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

async fn put(app: &App, item: NewItem) -> Uuid {
    app.harness.store.item_insert(&item).await.unwrap().item.id
}

async fn claim(app: &App, lane: &str, worker: &str) -> ClaimRef {
    let got = app
        .harness
        .store
        .item_claim(&ClaimParams {
            lane: lane.into(),
            kinds: vec![],
            worker_id: worker.into(),
            lease: Duration::from_secs(60),
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "one item to claim in {lane}");
    ClaimRef::of(&got[0]).unwrap()
}

async fn fail(app: &App, c: &ClaimRef, error: &str) {
    app.harness
        .store
        .item_fail(
            c,
            &FailParams {
                error: error.into(),
                retry_delay: Duration::ZERO,
                fatal: false,
            },
        )
        .await
        .unwrap();
}

/// The attempt history on the API and the item page; runs and failures;
/// actors by label; actions by status; why a pending item waits.
async fn runs_actors_and_actions(app: App) {
    let id = put(
        &app,
        NewItem::new("report", json!({"n": 1})).with_lane("hist"),
    )
    .await;
    let c = claim(&app, "hist", "worker-a").await;
    fail(&app, &c, "upstream 503 for order 42").await;
    let c = claim(&app, "hist", "worker-b").await;
    app.harness.store.item_complete(&c).await.unwrap();

    let (s, _, body) = app
        .call(
            Method::GET,
            &format!("/v1/items/{id}"),
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let runs = body["runs"].as_array().expect("a runs array");
    assert_eq!(runs.len(), 2, "{body}");
    assert_eq!(runs[0]["outcome"], "done");
    assert_eq!(runs[0]["worker"], "worker-b");
    assert_eq!(runs[0]["claim_seq"], 2);
    assert!(runs[0]["error"].is_null());
    assert_eq!(runs[1]["outcome"], "retry");
    assert_eq!(runs[1]["worker"], "worker-a");
    assert_eq!(runs[1]["error"], "upstream 503 for order 42");
    for r in runs {
        assert!(r["duration_ms"].as_i64().unwrap() >= 0);
        assert!(r["started_at"].is_string() && r["finished_at"].is_string());
    }
    assert_eq!(body["attempts"]["spent"], 1);
    assert_eq!(body["attempts"]["claims"], 2);

    // An operator's retry is audited with the token's label as its actor.
    let (s, _, _) = app
        .call(
            Method::POST,
            &format!("/v1/items/{id}/retry"),
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, _, body) = app
        .call(
            Method::GET,
            &format!("/v1/items/{id}"),
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    let audit = body["audit"].as_array().unwrap();
    let retry = audit
        .iter()
        .find(|a| a["action"] == "retry")
        .expect("a retry entry");
    assert_eq!(retry["actor_label"], "test");
    assert_eq!(
        body["runs"].as_array().unwrap().len(),
        2,
        "the runs outlive a retry"
    );

    let (cookie, _) = login(&app, &app.admin).await;
    let page = |id: Uuid| {
        let cookie = cookie.clone();
        let app = &app;
        async move {
            let (s, _, body) = raw(
                app,
                Method::GET,
                &format!("/ui/items/{}/{id}", Uuid::nil()),
                Some(&cookie),
                None,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{body}");
            body
        }
    };
    // Retried, so pending again: two runs, one failure; Cancel offered,
    // Retry not; why it waits (no worker serves the lane).
    let body = page(id).await;
    assert!(body.contains("id=\"item-runs\">2<"), "{body}");
    assert!(body.contains("id=\"item-failures\">0 of 5"), "{body}");
    assert!(body.contains("id=\"runs\""));
    assert!(body.contains("worker-a") && body.contains("worker-b"));
    assert!(body.contains("upstream 503 for order 42"));
    assert!(
        body.contains("class=\"actor\">test<"),
        "the retry's actor by label"
    );
    assert!(body.contains("id=\"cancel\"") && !body.contains("id=\"retry\""));
    assert!(body.contains("id=\"item-waiting\""));
    assert!(body.contains("no live worker drains lane hist"), "{body}");

    // Done: Retry only; a done item reads one run, no failure.
    let c = claim(&app, "hist", "worker-c").await;
    app.harness.store.item_complete(&c).await.unwrap();
    let body = page(id).await;
    assert!(body.contains("id=\"item-runs\">3<"));
    assert!(body.contains("id=\"item-failures\">0 of 5"));
    assert!(body.contains("id=\"retry\"") && !body.contains("id=\"cancel\""));

    // Dead-lettered: Retry and Discard; the dead letter's actor is system.
    let dead = put(
        &app,
        NewItem::new("report", json!({}))
            .with_lane("dl")
            .with_max_attempts(1),
    )
    .await;
    let c = claim(&app, "dl", "worker-a").await;
    fail(&app, &c, "boom").await;
    let body = page(dead).await;
    assert!(body.contains("class=\"actor\">system<"), "{body}");
    assert!(body.contains("id=\"retry\"") && body.contains(">Discard<"));
    assert!(body.contains("failed"));

    // Claimed: the run in flight shows as running.
    let running = put(&app, NewItem::new("report", json!({})).with_lane("run")).await;
    claim(&app, "run", "worker-z").await;
    let body = page(running).await;
    assert!(body.contains(">running<") && body.contains("worker-z"));
    assert!(body.contains("id=\"cancel\"") && !body.contains("id=\"retry\""));

    // A future run_at is named as the reason it waits.
    let later = put(
        &app,
        NewItem::new("report", json!({}))
            .with_lane("later")
            .with_available_at(chrono::Utc::now() + chrono::Duration::hours(2)),
    )
    .await;
    let body = page(later).await;
    assert!(body.contains("run_at"), "{body}");
    app.finish().await;
}

#[tokio::test]
async fn memory_runs_actors_and_actions() {
    runs_actors_and_actions(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_runs_actors_and_actions() {
    runs_actors_and_actions(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_runs_actors_and_actions() {
    runs_actors_and_actions(common::postgres().await).await;
}

/// The item page names what an item waits for and what waits for it,
/// each a link to its page; an item with neither has no such section.
async fn item_page_links(app: App) {
    let a = Uuid::now_v7();
    let b = Uuid::now_v7();
    let mut first = NewItem::new("step", serde_json::json!({})).with_lane("links");
    first.id = a;
    let mut second = NewItem::new("step", serde_json::json!({}))
        .with_lane("links")
        .with_after([a]);
    second.id = b;
    app.queue
        .enqueue_dag(&drover::queue::Principal::system(), vec![second, first])
        .await
        .unwrap();
    let lone = put(&app, NewItem::new("step", serde_json::json!({}))).await;
    let (cookie, _) = login(&app, &app.admin).await;
    let page = |id: Uuid| {
        let cookie = cookie.clone();
        let app = &app;
        async move {
            let (s, _, body) = raw(
                app,
                Method::GET,
                &format!("/ui/items/{}/{id}", Uuid::nil()),
                Some(&cookie),
                None,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{body}");
            body
        }
    };
    let waiting = page(b).await;
    assert!(waiting.contains("id=\"item-links\""), "{waiting}");
    assert!(waiting.contains("waits for"), "{waiting}");
    assert!(
        waiting.contains(&format!("/items/{}/{a}", Uuid::nil())),
        "{waiting}"
    );
    assert!(waiting.contains("1 not done yet"), "{waiting}");
    let dependency = page(a).await;
    assert!(dependency.contains("dependants"), "{dependency}");
    assert!(
        dependency.contains(&format!("/items/{}/{b}", Uuid::nil())),
        "{dependency}"
    );
    assert!(!page(lone).await.contains("id=\"item-links\""));
    app.finish().await;
}

#[tokio::test]
async fn memory_item_page_links() {
    item_page_links(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_item_page_links() {
    item_page_links(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_item_page_links() {
    item_page_links(common::postgres().await).await;
}

/// The first `href` of the element with `id`, unescaped.
fn href(body: &str, id: &str) -> Option<String> {
    let at = body.find(&format!("id=\"{id}\" href=\""))? + id.len() + 12;
    let end = body[at..].find('"')? + at;
    Some(
        body[at..end]
            .replace("&amp;", "&")
            .replace("&#38;", "&")
            .replace("&#x2F;", "/"),
    )
}

/// The ids of a list page's rows, in order.
fn row_ids(body: &str) -> Vec<String> {
    body.match_indices("<tr data-id=\"")
        .map(|(at, _)| body[at + 13..at + 49].to_owned())
        .collect()
}

/// Lists that fit: short ids with copy, columns, a preview, paging both
/// ways, and a total when it is cheap.
async fn lists_fit_and_page_both_ways(app: App) {
    let mut ids = Vec::new();
    for n in 0..120 {
        let item = NewItem::new(
            "sync",
            json!({"customer": format!("c-{n}"), "pad": "x".repeat(200)}),
        )
        .with_lane("lists")
        .with_priority(n % 3)
        .with_available_at(chrono::Utc::now() + chrono::Duration::minutes(10));
        ids.push(put(&app, item).await);
    }
    let (cookie, _) = login(&app, &app.admin).await;
    app.queue.counts().await.unwrap();
    let (s, _, first) = raw(
        &app,
        Method::GET,
        "/ui/items?lane=lists",
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let newest = ids.last().unwrap().to_string();
    assert!(
        first.contains(&format!("data-copy=\"{newest}\"")),
        "a copy button"
    );
    assert!(
        first.contains(&format!(">{}</a>", &newest[newest.len() - 8..])),
        "a short id"
    );
    for col in [
        "<th>priority</th>",
        "<th>run at</th>",
        "<th>created</th>",
        "<th>payload</th>",
    ] {
        assert!(first.contains(col), "{col}");
    }
    assert!(
        first.contains("in 9m") || first.contains("in 10m"),
        "run at reads relative"
    );
    assert!(
        first.contains("customer") && first.contains('…'),
        "a cut preview"
    );
    assert!(first.contains("of 120 in all"), "a total from the counts");
    assert!(href(&first, "prev-page").is_none() && href(&first, "first-page").is_none());
    let first_rows = row_ids(&first);
    assert_eq!(first_rows.len(), 50);

    let next = href(&first, "next-page").expect("a next page");
    let (_, _, second) = raw(&app, Method::GET, &next, Some(&cookie), None).await;
    let second_rows = row_ids(&second);
    assert_eq!(second_rows.len(), 50);
    assert!(second_rows.iter().all(|r| !first_rows.contains(r)));
    let next = href(&second, "next-page").expect("a third page");
    let (_, _, third) = raw(&app, Method::GET, &next, Some(&cookie), None).await;
    assert_eq!(row_ids(&third).len(), 20);
    assert!(href(&third, "next-page").is_none());

    let prev = href(&third, "prev-page").expect("a previous page");
    let (_, _, back2) = raw(&app, Method::GET, &prev, Some(&cookie), None).await;
    assert_eq!(
        row_ids(&back2),
        second_rows,
        "previous is the second page again"
    );
    let prev = href(&back2, "prev-page").expect("back to the first");
    let (_, _, back1) = raw(&app, Method::GET, &prev, Some(&cookie), None).await;
    assert_eq!(row_ids(&back1), first_rows);
    assert!(href(&third, "first-page").is_some());

    let (_, _, keyed) = raw(
        &app,
        Method::GET,
        "/ui/items?lane=lists&key=nope",
        Some(&cookie),
        None,
    )
    .await;
    assert!(
        keyed.contains("total not counted"),
        "a filter with no cheap total says so"
    );
    app.finish().await;
}

#[tokio::test]
async fn memory_lists_fit_and_page_both_ways() {
    lists_fit_and_page_both_ways(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_lists_fit_and_page_both_ways() {
    lists_fit_and_page_both_ways(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lists_fit_and_page_both_ways() {
    lists_fit_and_page_both_ways(common::postgres().await).await;
}

/// The dead letter by kind and normalised error; "retry all in this
/// group" retries that group only, audited with the token's label.
async fn dead_letter_groups(app: App) {
    let mut timed_out = Vec::new();
    for (kind, error) in [
        ("sync", "order 12 timed out after 30s"),
        ("sync", "order 345 timed out after 5s"),
        ("sync", "disk full"),
        ("mail", "order 7 timed out after 1s"),
    ] {
        let id = put(
            &app,
            NewItem::new(kind, json!({}))
                .with_lane("dead")
                .with_max_attempts(1),
        )
        .await;
        let c = claim(&app, "dead", "w").await;
        fail(&app, &c, error).await;
        if kind == "sync" && error.starts_with("order") {
            timed_out.push(id);
        }
    }
    let (cookie, csrf) = login(&app, &app.admin).await;
    let (s, _, page) = raw(&app, Method::GET, "/ui/dead", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains("id=\"groups\""), "{page}");
    let pattern = "order # timed out after #s";
    let shown = pattern.replace('#', "&#x23;");
    assert!(
        page.contains(pattern) || page.contains(&shown),
        "the normalised error is shown: {page}"
    );
    assert!(page.contains("Retry all in this group"));

    let form = format!(
        "csrf={csrf}&back={}&kind=sync&pattern={}",
        encode("/ui/dead"),
        encode(pattern)
    );
    let (s, h, _) = raw(
        &app,
        Method::POST,
        "/ui/dead/retry-group",
        Some(&cookie),
        Some(form),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let to = h[header::LOCATION].to_str().unwrap();
    assert!(to.contains("retried%202"), "{to}");
    for id in &timed_out {
        let item = app.queue.get(Uuid::nil(), *id).await.unwrap();
        assert_eq!(item.status, Status::Pending);
        let audit = app.queue.audit(Uuid::nil(), *id).await.unwrap();
        assert!(
            audit
                .iter()
                .any(|a| a.action == "retry" && !a.actor.is_nil())
        );
    }
    let still = app
        .queue
        .list(&drover::store::ListFilter {
            status: Some(Status::Failed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut left: Vec<(String, String)> = still
        .iter()
        .map(|i| (i.kind.clone(), i.last_error.clone().unwrap_or_default()))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ("mail".to_owned(), "order 7 timed out after 1s".to_owned()),
            ("sync".to_owned(), "disk full".to_owned()),
        ],
        "only the group was retried"
    );

    // Without the CSRF token nothing is retried.
    let form = format!("back={}&kind=sync&pattern=disk%20full", encode("/ui/dead"));
    let (s, _, _) = raw(
        &app,
        Method::POST,
        "/ui/dead/retry-group",
        Some(&cookie),
        Some(form),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        app.queue
            .list(&drover::store::ListFilter {
                status: Some(Status::Failed),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
        2
    );
    app.finish().await;
}

#[tokio::test]
async fn memory_dead_letter_groups() {
    dead_letter_groups(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_dead_letter_groups() {
    dead_letter_groups(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_dead_letter_groups() {
    dead_letter_groups(common::postgres().await).await;
}

/// A tenant-scoped operator's overview counts its own tenant's items (not
/// empty, not another tenant's), says "no worker" for its lane with
/// waiting items and that its dead letter grew, and charts its own history
/// (another tenant's failure not in it), with nothing installation-wide.
async fn tenant_overview(app: App) {
    let (a, b) = (Uuid::from_u128(0xA1), Uuid::from_u128(0xB2));
    put(
        &app,
        NewItem::new("ship", json!({}))
            .with_lane("lane-a")
            .with_tenant(a)
            .with_max_attempts(1),
    )
    .await;
    let c = claim(&app, "lane-a", "w").await;
    fail(&app, &c, "boom").await;
    for _ in 0..2 {
        put(
            &app,
            NewItem::new("bill", json!({}))
                .with_lane("lane-a")
                .with_tenant(a),
        )
        .await;
    }
    for _ in 0..3 {
        put(
            &app,
            NewItem::new("other", json!({}))
                .with_lane("lane-b")
                .with_tenant(b),
        )
        .await;
    }
    // Another tenant's dead letter, in the same minute.
    put(
        &app,
        NewItem::new("other", json!({}))
            .with_lane("lane-c")
            .with_tenant(b)
            .with_max_attempts(1),
    )
    .await;
    let c = claim(&app, "lane-c", "w").await;
    fail(&app, &c, "elsewhere").await;
    // The history the charts read, settled by the sweep (run here).
    let since = app.queue.db_now().await.unwrap() - chrono::TimeDelta::hours(1);
    let failed_of = |t: Uuid| {
        let q = app.queue.clone();
        async move {
            q.throughput(&drover::store::throughput::ThroughputQuery {
                since,
                tenant_id: Some(t),
                by: drover::store::throughput::ThroughputBy::Minute,
            })
            .await
            .unwrap()
            .iter()
            .map(|r| r.failed)
            .sum::<i64>()
        }
    };
    // The settlement stops a second short of the store's clock: move it on.
    for _ in 0..100 {
        app.harness
            .pass(std::time::Duration::from_millis(200))
            .await;
        app.queue.store().counts_settle().await.unwrap();
        if (failed_of(a).await, failed_of(b).await) == (1, 1) {
            break;
        }
    }
    let scoped = app
        .token(drover_http::Role::Operator, Some(a), &["*"])
        .await;
    let (cookie, _) = login(&app, &scoped).await;
    let (s, _, page) = raw(&app, Method::GET, "/ui/", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains(&a.to_string()), "{page}");
    assert!(page.contains("id=\"lane-counts\""));
    assert!(
        page.contains("lane-a") && !page.contains("lane-b"),
        "{page}"
    );
    assert!(page.contains("bill") && !page.contains(">other<"));
    assert!(
        page.contains("id=\"failed-total\">1<"),
        "its own dead letter"
    );
    assert!(!page.contains("id=\"workers\"") && !page.contains("host"));
    for hidden in ["/ui/workers\"", "/ui/schedules\"", "/ui/lanes\""] {
        assert!(!page.contains(hidden), "no link to {hidden}");
    }
    assert!(page.contains("/ui/items\"") && page.contains("/ui/orchestrations\""));
    let at = page.find("id=\"alerts\"").expect("alerts");
    let alerts = &page[at..at + page[at..].find("</ul>").unwrap()];
    assert!(
        alerts.contains("lane lane-a: 2 waiting, no worker"),
        "{alerts}"
    );
    assert!(
        alerts.contains("dead letter grew by 1 in the last hour (now 1)"),
        "its own dead letter only: {alerts}"
    );
    assert!(!alerts.contains("lane-b") && !alerts.contains("lane-c"));
    assert!(page.contains("id=\"chart-hour\"") && page.contains("time (UTC)"));
    assert!(
        !page.contains("queue-wait"),
        "the queue wait is installation-wide: not on a tenant's overview"
    );
    assert!(
        page.contains("0 done · 1 failed"),
        "the tenant's own history, not the other tenant's failure"
    );
    app.finish().await;
}

#[tokio::test]
async fn memory_tenant_overview() {
    tenant_overview(common::memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_tenant_overview() {
    tenant_overview(common::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tenant_overview() {
    tenant_overview(common::postgres().await).await;
}
