//! The API cases every backend runs (PostgreSQL and SQLite files call
//! [`api_suite!`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use axum::http::{Method, StatusCode};
use drover_http::Role;
use serde_json::{Value, json};

use crate::common::App;

mod contract;
mod fairness;
mod results;
pub use contract::*;
pub use fairness::*;
mod links;
pub use links::*;
pub use results::*;

const PROBLEM: &str = "application/problem+json";

fn ct(h: &axum::http::HeaderMap) -> &str {
    h.get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Enqueue, list, read with audit, cancel, retry; the audit names the
/// token as the actor.
pub async fn enqueue_list_show_cancel_retry(app: &App) {
    let op = app.token(Role::Operator, None, &["mail.*"]).await;
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&op),
            Some(json!({"kind": "mail.send", "payload": {"to": "a@b"}, "lane": "mail", "group": "customer:1"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["result"], "inserted");
    let id = b["id"].as_str().unwrap().to_owned();
    assert_eq!(b["item"]["status"], "pending");
    assert_eq!(b["item"]["lane"], "mail");
    assert_eq!(b["item"]["group"], "customer:1");

    // The group filters a listing; an invalid one is the caller's 400.
    for (group, n) in [("customer:1", 1), ("customer:2", 0)] {
        let (s, _, page) = app
            .call(
                Method::GET,
                &format!("/v1/items?group={group}"),
                Some(&op),
                None,
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(
            page["items"].as_array().unwrap().len(),
            n,
            "{group}: {page}"
        );
    }
    let (s, _, b) = app
        .call(
            Method::GET,
            "/v1/items?group=Not%20A%20Group",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("group")),
        "{b}"
    );
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&op),
            Some(json!({"kind": "mail.send", "group": "Bad Group"})),
            &[],
        )
        .await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("group")),
        "{b}"
    );

    let (s, _, page) = app
        .call(
            Method::GET,
            "/v1/items?lane=mail&status=pending",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["id"], id.as_str());
    assert!(page.get("next_cursor").is_none());

    let (s, _, b) = app
        .call(
            Method::POST,
            &format!("/v1/items/{id}/cancel"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["status"], "cancelled");
    let (s, h, b) = app
        .call(
            Method::POST,
            &format!("/v1/items/{id}/cancel"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    assert_eq!(ct(&h), PROBLEM);
    let (s, _, b) = app
        .call(
            Method::POST,
            &format!("/v1/items/{id}/retry"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["status"], "pending");

    let (s, _, d) = app
        .call(
            Method::GET,
            &format!("/v1/items/{id}"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    let actions: Vec<&str> = d["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["cancel", "retry"]);
    let actor = d["audit"][0]["actor"].as_str().unwrap();
    assert_ne!(
        actor,
        uuid::Uuid::nil().to_string(),
        "the token is the actor"
    );
    assert_eq!(d["attempts"]["budget"], 5);

    let (s, _, b) = app
        .call(
            Method::GET,
            &format!("/v1/items/{}", uuid::Uuid::now_v7()),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{b}");
}

/// Roles and grants: a viewer reads but may not retry; a token may not
/// enqueue a kind outside its grants; read-only refuses writes.
pub async fn roles_grants_and_read_only(app: &App) {
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let mailer = app.token(Role::Viewer, None, &["mail.*"]).await;
    let (s, _, _) = app
        .call(Method::GET, "/v1/items", Some(&viewer), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&viewer),
            Some(json!({"kind": "mail.send"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    assert_eq!(b["field"], "kind");
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&mailer),
            Some(json!({"kind": "billing.refund"})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::FORBIDDEN, Some("kind"))
    );
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&mailer),
            Some(json!({"kind": "mail.send"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let id = b["id"].as_str().unwrap();
    let (s, _, b) = app
        .call(
            Method::POST,
            &format!("/v1/items/{id}/cancel"),
            Some(&mailer),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, _, _) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(&viewer),
            Some(json!({"action": "cancel", "preview": true})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    let ro = drover_http::router(
        app.queue.clone(),
        drover_http::tokens::auth_from_store(&app.queue)
            .await
            .unwrap()
            .read_only(true),
    );
    let ro_app = App {
        router: ro,
        queue: app.queue.clone(),
        admin: app.admin.clone(),
        harness: empty_harness(app),
    };
    let (s, _, b) = ro_app
        .call(
            Method::POST,
            "/v1/items",
            Some(&app.admin),
            Some(json!({"kind": "x"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, _, _) = ro_app
        .call(Method::GET, "/v1/items", Some(&app.admin), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK);
}

fn empty_harness(app: &App) -> drover::store::contract::Harness {
    drover::store::contract::Harness {
        store: app.queue.store().clone(),
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    }
}

/// Problems name the field; an oversized body is 413; an unknown kind is
/// accepted, waits, and is flagged in stats.
pub async fn problems_oversize_and_unknown_kinds(app: &App) {
    let t = &app.admin;
    let (s, h, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"kind": "Bad Kind!"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(ct(&h), PROBLEM);
    assert_eq!(b["field"], "kind");
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"payload": {}})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b["detail"].as_str().unwrap().contains("kind"), "{b}");
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"kind": "k", "lane": "Nope Lane"})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("lane")),
        "{b}"
    );
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/batch",
            Some(t),
            Some(json!({"items": [{"kind": "ok"}, {"kind": "ok", "priority": "high"}]})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("items[1].priority")),
        "{b}"
    );
    let (s, _, b) = app
        .call(Method::GET, "/v1/items?status=sleeping", Some(t), None, &[])
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("status")),
        "{b}"
    );
    let (s, _, b) = app
        .call(Method::GET, "/v1/items?limit=0", Some(t), None, &[])
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("limit")),
        "{b}"
    );
    let (s, _, b) = app
        .call(Method::GET, "/v1/items?cursor=garbage", Some(t), None, &[])
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("cursor")),
        "{b}"
    );

    let big = vec![b'x'; drover_http::MAX_BODY_BYTES_DEFAULT + 10];
    let (s, h, b) = app
        .call_raw(Method::POST, "/v1/items", Some(t), Some(big), &[])
        .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{b}");
    assert_eq!(ct(&h), PROBLEM);
    // A payload over the queue's own limit is refused naming the payload.
    let payload = "y".repeat(drover::item::DEFAULT_MAX_PAYLOAD_BYTES + 1);
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"kind": "k", "payload": {"p": payload}})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("payload")),
        "{b}"
    );

    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"kind": "nobody.handles.this"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["known_kind"], false);
    let (s, _, stats) = app.call(Method::GET, "/v1/stats", Some(t), None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{stats}");
    let unhandled: Vec<&str> = stats["unhandled_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(unhandled.contains(&"nobody.handles.this"), "{stats}");
    assert!(stats["totals"]["pending"].as_i64().unwrap() >= 1);
    let (s, _, lanes) = app.call(Method::GET, "/v1/lanes", Some(t), None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        lanes
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["lane"] == "default" && l["counts"]["pending"].as_i64() >= Some(1)),
        "{lanes}"
    );
    for path in [
        "/v1/workers",
        "/v1/schedules",
        "/v1/orchestrations",
        "/v1/openapi.json",
    ] {
        let (s, _, b) = app.call(Method::GET, path, Some(t), None, &[]).await;
        assert_eq!(s, StatusCode::OK, "{path}: {b}");
    }
    let (s, h, _) = app
        .call(Method::DELETE, "/v1/items", Some(t), None, &[])
        .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(ct(&h), PROBLEM);
}

/// Idempotency-Key: a retry replays the stored answer; another body is
/// 422; another route or principal is another key.
pub async fn idempotency_replay_and_mismatch(app: &App) {
    let t = &app.admin;
    let body = json!({"kind": "k", "payload": {"n": 1}});
    let key = [("idempotency-key", "order-1")];
    let (s1, h1, b1) = app
        .call(Method::POST, "/v1/items", Some(t), Some(body.clone()), &key)
        .await;
    assert_eq!(s1, StatusCode::CREATED, "{b1}");
    assert!(h1.get("idempotent-replayed").is_none());
    let (s2, h2, b2) = app
        .call(Method::POST, "/v1/items", Some(t), Some(body.clone()), &key)
        .await;
    assert_eq!(
        (s2, &b2),
        (StatusCode::CREATED, &b1),
        "the stored answer, status and body"
    );
    assert_eq!(h2.get("idempotent-replayed").unwrap(), "true");
    let (s3, h3, b3) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(json!({"kind": "k", "payload": {"n": 2}})),
            &key,
        )
        .await;
    assert_eq!(s3, StatusCode::UNPROCESSABLE_ENTITY, "{b3}");
    assert_eq!(ct(&h3), PROBLEM);
    assert_eq!(b3["field"], "Idempotency-Key");
    // The same key on another route, or from another token, is its own.
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/batch",
            Some(t),
            Some(json!({"items": [body.clone()]})),
            &key,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let other = app.token(Role::Admin, None, &["*"]).await;
    let (s, h, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&other),
            Some(body.clone()),
            &key,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert!(h.get("idempotent-replayed").is_none());
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(body),
            &[("idempotency-key", "")],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("Idempotency-Key"))
    );
    // Three items: the first request, the batch, the other token's.
    let (_, _, page) = app
        .call(Method::GET, "/v1/items?kind=k", Some(t), None, &[])
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 3, "{page}");
}

/// 50 concurrent requests with one key: one item; every other answer a
/// replay of the same body or a 409.
pub async fn idempotency_fifty_concurrent_one_item(app: &App) {
    let body = json!({"kind": "race", "payload": {"x": 1}});
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let router = app.router.clone();
        let token = app.admin.clone();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let body = serde_json::to_vec(&body).unwrap();
            crate::common::send(
                &router,
                Method::POST,
                "/v1/items",
                Some(&token),
                Some(body),
                &[("idempotency-key", "fifty")],
            )
            .await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let created: Vec<&Value> = answers
        .iter()
        .filter(|(s, h, _)| *s == StatusCode::CREATED && h.get("idempotent-replayed").is_none())
        .map(|(_, _, b)| b)
        .collect();
    assert_eq!(created.len(), 1, "exactly one request ran");
    let first = created[0];
    let (mut replays, mut conflicts) = (0, 0);
    for (s, h, b) in &answers {
        if h.get("idempotent-replayed").is_some() {
            assert_eq!((*s, b), (StatusCode::CREATED, first));
            replays += 1;
        } else if *s == StatusCode::CONFLICT {
            assert_eq!(b["field"], "Idempotency-Key");
            conflicts += 1;
        }
    }
    assert_eq!(replays + conflicts, 49, "{answers:?}");
    let (_, _, page) = app
        .call(
            Method::GET,
            "/v1/items?kind=race",
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
}

/// A router over `app`'s store wrapped in a fault store (inserts can be
/// held at a gate), with its own admin token and the gatherer's counters.
async fn held_app(
    app: &App,
    config: drover_http::HttpConfig,
) -> (
    axum::Router,
    drover_http::TokenSecret,
    std::sync::Arc<drover::store::fault::Faults>,
    std::sync::Arc<drover_http::api::gather::GatherStats>,
) {
    let store = std::sync::Arc::new(drover::store::fault::FaultStore::new(
        app.harness.store.clone(),
    ));
    let faults = store.faults.clone();
    let queue = drover::Queue::new(store);
    let admin = crate::common::mint(&queue, Role::Admin, None, &["*"]).await;
    let auth = drover_http::tokens::auth_from_store(&queue).await.unwrap();
    let (router, stats) = drover_http::router_and_stats(queue, auth, config);
    (router, admin, faults, stats)
}

/// The same key while the first request is held open mid-write answers
/// 409 (another body 422); after the first answers, a retry replays it.
/// Gathered and not.
pub async fn idempotency_in_flight_conflict_then_replay(app: &App) {
    use std::sync::atomic::Ordering::SeqCst;
    for gathered in [true, false] {
        let mut config = drover_http::HttpConfig::default();
        config.gather.enabled = gathered;
        let (router, admin, faults, stats) = held_app(app, config).await;
        let key = format!("held-{gathered}");
        let body =
            serde_json::to_vec(&json!({"kind": "held", "payload": {"g": gathered}})).unwrap();
        let headers = [("idempotency-key", key.as_str())];
        faults.insert_hold.store(true, SeqCst);
        let first = {
            let (router, admin, body, key) =
                (router.clone(), admin.clone(), body.clone(), key.clone());
            tokio::spawn(async move {
                crate::common::send(
                    &router,
                    Method::POST,
                    "/v1/items",
                    Some(&admin),
                    Some(body),
                    &[("idempotency-key", key.as_str())],
                )
                .await
            })
        };
        // The first request's marker is claimed and its insert waits.
        faults.insert_gate.arrived().await;
        let (s, h, b) = crate::common::send(
            &router,
            Method::POST,
            "/v1/items",
            Some(&admin),
            Some(body.clone()),
            &headers,
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "gathered {gathered}: {b}");
        assert_eq!(ct(&h), PROBLEM);
        assert_eq!(b["field"], "Idempotency-Key");
        let other = serde_json::to_vec(&json!({"kind": "held", "payload": {"other": 1}})).unwrap();
        let (s, _, b) = crate::common::send(
            &router,
            Method::POST,
            "/v1/items",
            Some(&admin),
            Some(other),
            &headers,
        )
        .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
        faults.insert_hold.store(false, SeqCst);
        faults.insert_gate.release(1);
        let (s1, h1, b1) = first.await.unwrap();
        assert_eq!(s1, StatusCode::CREATED, "{b1}");
        assert!(h1.get("idempotent-replayed").is_none());
        let (s3, h3, b3) = crate::common::send(
            &router,
            Method::POST,
            "/v1/items",
            Some(&admin),
            Some(body),
            &headers,
        )
        .await;
        assert_eq!((s3, &b3), (StatusCode::CREATED, &b1), "the replay");
        assert_eq!(h3.get("idempotent-replayed").unwrap(), "true");
        if gathered {
            assert_eq!(
                stats.requests(),
                4,
                "all four requests went through the gatherer"
            );
        } else {
            assert_eq!(stats.requests(), 0, "gathering off: nothing gathered");
        }
    }
    let (_, _, page) = app
        .call(
            Method::GET,
            "/v1/items?kind=held",
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(
        page["items"].as_array().unwrap().len(),
        2,
        "one item per key: {page}"
    );
}

/// Concurrent single-item requests are gathered: 50 requests held behind
/// the first batches land in at most three item transactions, each
/// answered with its own item; one oversized payload gets its own 400 and
/// one id of another tenant's item its own 409, the rest succeed.
pub async fn gathering_many_requests_few_commits(app: &App) {
    use std::sync::atomic::Ordering::SeqCst;
    let (router, admin, faults, stats) = held_app(app, drover_http::HttpConfig::default()).await;
    let foreign_tenant = uuid::Uuid::now_v7();
    let foreign = app
        .queue
        .enqueue_item(
            &drover::queue::Principal::system(),
            drover::NewItem::new("foreign", json!({})).with_tenant(foreign_tenant),
        )
        .await
        .unwrap()
        .item
        .id;
    const OVERSIZED: usize = 7;
    const TAKEN: usize = 13;
    faults.insert_hold.store(true, SeqCst);
    let mut tasks = Vec::new();
    for i in 0..50usize {
        let body = match i {
            OVERSIZED => json!({"kind": "gathered", "payload": {"blob": "x".repeat(300 * 1024)}}),
            TAKEN => json!({"kind": "gathered", "payload": {"i": i}, "id": foreign}),
            _ => json!({"kind": "gathered", "payload": {"i": i}}),
        };
        let (router, admin) = (router.clone(), admin.clone());
        tasks.push(tokio::spawn(async move {
            let key = format!("gather-{i}");
            crate::common::send(
                &router,
                Method::POST,
                "/v1/items",
                Some(&admin),
                Some(serde_json::to_vec(&body).unwrap()),
                &[("idempotency-key", key.as_str())],
            )
            .await
        }));
    }
    // Every request is queued before the held batches are let go.
    stats.queued_at_least(50).await;
    faults.insert_hold.store(false, SeqCst);
    faults.insert_gate.release(50);
    let mut ids = std::collections::HashSet::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let (s, h, b) = t.await.unwrap();
        match i {
            OVERSIZED => {
                assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
                assert_eq!(ct(&h), PROBLEM);
                assert_eq!(b["field"], "payload");
            }
            TAKEN => {
                assert_eq!(s, StatusCode::CONFLICT, "{b}");
                assert_eq!(ct(&h), PROBLEM);
            }
            _ => {
                assert_eq!(s, StatusCode::CREATED, "request {i}: {b}");
                assert_eq!(b["item"]["payload"]["i"], i, "its own item");
                assert!(ids.insert(b["id"].as_str().unwrap().to_owned()));
            }
        }
    }
    assert_eq!(ids.len(), 48);
    assert_eq!(stats.requests(), 50);
    assert!(
        stats.batches() <= 3,
        "50 requests in {} item transactions",
        stats.batches()
    );
    // Each kept its own marker: a retry of the oversized one replays its 400.
    let (s, h, _) = crate::common::send(
        &router,
        Method::POST,
        "/v1/items",
        Some(&admin),
        Some(
            serde_json::to_vec(
                &json!({"kind": "gathered", "payload": {"blob": "x".repeat(300 * 1024)}}),
            )
            .unwrap(),
        ),
        &[("idempotency-key", "gather-7")],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    let (_, _, page) = app
        .call(
            Method::GET,
            "/v1/items?kind=gathered&limit=500",
            Some(&app.admin),
            None,
            &[],
        )
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 48);
}

/// Bulk: the preview counts and changes nothing; the apply is capped and
/// audited; cursor pages visit every item once.
pub async fn bulk_and_cursor_pages(app: &App) {
    let t = &app.admin;
    let items: Vec<Value> = (0..7)
        .map(|i| json!({"kind": "bulk", "payload": {"i": i}}))
        .collect();
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/batch",
            Some(t),
            Some(json!({"items": items})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["inserted"].as_u64()),
        (StatusCode::CREATED, Some(7)),
        "{b}"
    );

    let mut seen = Vec::new();
    let mut uri = "/v1/items?kind=bulk&limit=3".to_owned();
    loop {
        let (s, _, page) = app.call(Method::GET, &uri, Some(t), None, &[]).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => uri = format!("/v1/items?kind=bulk&limit=3&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 7, "no item twice");

    let filter = json!({"kind": "bulk", "status": "pending"});
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(t),
            Some(json!({"action": "cancel", "filter": filter, "preview": true})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (
            b["matched"].as_u64(),
            b["applied"].as_u64(),
            b["preview"].as_bool()
        ),
        (Some(7), Some(0), Some(true))
    );
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(t),
            Some(json!({"action": "cancel", "filter": filter, "max": 5})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (
            b["matched"].as_u64(),
            b["applied"].as_u64(),
            b["more"].as_bool()
        ),
        (Some(5), Some(5), Some(true))
    );
    let (_, _, left) = app
        .call(
            Method::GET,
            "/v1/items?kind=bulk&status=pending",
            Some(t),
            None,
            &[],
        )
        .await;
    assert_eq!(left["items"].as_array().unwrap().len(), 2);
    let (_, _, cancelled) = app
        .call(
            Method::GET,
            "/v1/items?kind=bulk&status=cancelled",
            Some(t),
            None,
            &[],
        )
        .await;
    let id = cancelled["items"][0]["id"].as_str().unwrap();
    let (_, _, d) = app
        .call(Method::GET, &format!("/v1/items/{id}"), Some(t), None, &[])
        .await;
    assert_eq!(d["audit"][0]["action"], "cancel");
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(t),
            Some(json!({"action": "retry", "filter": {"kind": "bulk", "status": "cancelled"}})),
            &[],
        )
        .await;
    assert_eq!((s, b["applied"].as_u64()), (StatusCode::OK, Some(5)), "{b}");
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(t),
            Some(json!({"action": "retry", "max": 0})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("max"))
    );
}

/// A tenant-scoped token sees and touches only its tenant.
pub async fn tenant_scoped_token_sees_its_tenant_only(app: &App) {
    let (a, b) = (uuid::Uuid::from_u128(0xA1), uuid::Uuid::from_u128(0xB1));
    let ta = app.token(Role::Operator, Some(a), &["*"]).await;
    let tb = app.token(Role::Operator, Some(b), &["*"]).await;
    let (s, _, ib) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&tb),
            Some(json!({"kind": "secret"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(ib["item"]["tenant_id"], b.to_string());
    let idb = ib["id"].as_str().unwrap();
    let (s, _, ia) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&ta),
            Some(json!({"kind": "secret"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(ia["item"]["tenant_id"], a.to_string());
    let (s, _, page) = app
        .call(Method::GET, "/v1/items", Some(&ta), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [ia["id"].as_str().unwrap()]);
    let (s, _, _) = app
        .call(
            Method::GET,
            &format!("/v1/items/{idb}"),
            Some(&ta),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = app
        .call(
            Method::GET,
            &format!("/v1/items/{idb}?tenant={b}"),
            Some(&ta),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, _) = app
        .call(
            Method::POST,
            &format!("/v1/items/{idb}/cancel"),
            Some(&ta),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&ta),
            Some(json!({"kind": "x", "tenant": b})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, r) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(&ta),
            Some(json!({"action": "cancel", "filter": {"kind": "secret"}})),
            &[],
        )
        .await;
    assert_eq!((s, r["applied"].as_u64()), (StatusCode::OK, Some(1)), "{r}");
    let (_, _, d) = app
        .call(
            Method::GET,
            &format!("/v1/items/{idb}"),
            Some(&tb),
            None,
            &[],
        )
        .await;
    assert_eq!(d["item"]["status"], "pending", "tenant B's item untouched");
    let (s, _, _) = app
        .call(Method::GET, "/v1/stats", Some(&ta), None, &[])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "cross-tenant aggregates refused");
}

/// Limits over HTTP: an operator sets one, the listing shows it with its
/// use, it is cleared; a viewer and a tenant-scoped token may not set one;
/// a bad scope or concurrency is the caller's 400.
pub async fn limits_set_list_clear(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let scoped = app
        .token(Role::Operator, Some(uuid::Uuid::from_u128(5)), &["*"])
        .await;
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/limits/kind/export",
            Some(&op),
            Some(json!({"concurrency": 2})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["scope"].as_str(), b["concurrency"].as_u64()),
        (Some("kind"), Some(2))
    );
    assert_eq!(b["source"], "operator");
    // The actor by name beside its id: the token's label.
    assert_eq!(
        (b["set_by_label"].as_str(), b["set_by"].is_string()),
        (Some("test"), true),
        "{b}"
    );
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(&op),
                Some(json!({"kind": "export"})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    // A pending item says why it waits: here, no worker drains its lane.
    let (s, _, b) = app
        .call(
            Method::GET,
            &format!("/v1/items/{}", ids[0]),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let reasons: Vec<&str> = b["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["reason"].as_str())
        .collect();
    assert_eq!(reasons, vec!["no_worker"], "{b}");
    assert_eq!(
        b["waiting"][0]["detail"],
        "no live worker drains lane default"
    );
    // A live worker drains the lane but handles other kinds only: the
    // reason names the kind.
    let now = app.harness.store.db_now().await.unwrap();
    app.harness
        .store
        .worker_beat(&drover::store::WorkerRow {
            id: "w-mail".into(),
            host: "h".into(),
            pid: 1,
            lanes: vec!["default".into()],
            capacity: 1,
            started_at: now,
            last_beat_at: now,
            state: "running".into(),
            beat_interval_ms: 60_000,
            kinds: vec!["mail.send".into()],
            version: String::new(),
        })
        .await
        .unwrap();
    let (_, _, b) = app
        .call(
            Method::GET,
            &format!("/v1/items/{}", ids[0]),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(
        b["waiting"],
        json!([{"reason": "no_worker", "detail": "no live worker of lane default handles kind export"}])
    );
    let (_, _, w) = app
        .call(Method::GET, "/v1/workers", Some(&op), None, &[])
        .await;
    assert_eq!(w[0]["kinds"], json!(["mail.send"]), "{w}");
    let (s, _, list) = app
        .call(Method::GET, "/v1/limits", Some(&op), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(
        (list[0]["in_use"].as_u64(), list[0]["waiting"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(list[0]["set_by_label"], "test", "{list}");
    for (who, want) in [
        (&viewer, StatusCode::FORBIDDEN),
        (&scoped, StatusCode::FORBIDDEN),
    ] {
        let (s, _, b) = app
            .call(
                Method::PUT,
                "/v1/limits/kind/export",
                Some(who),
                Some(json!({"concurrency": 9})),
                &[],
            )
            .await;
        assert_eq!(s, want, "{b}");
    }
    for (path, body) in [
        ("/v1/limits/queue/export", json!({"concurrency": 1})),
        ("/v1/limits/kind/Not%20A%20Kind", json!({"concurrency": 1})),
        ("/v1/limits/kind/export", json!({"concurrency": 0})),
        ("/v1/limits/kind/export", json!({"limit": 1})),
        (
            "/v1/limits/kind/export",
            json!({"concurrency": 1, "ordered": true}),
        ),
        (
            "/v1/limits/group/export",
            json!({"concurrency": 2, "ordered": true}),
        ),
        (
            "/v1/limits/group/export",
            json!({"concurrency": 1, "ordered": true, "on_dead_letter": "skip"}),
        ),
    ] {
        let (s, _, b) = app
            .call(Method::PUT, path, Some(&op), Some(body), &[])
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {b}");
    }
    let (s, _, b) = app
        .call(
            Method::DELETE,
            "/v1/limits/kind/export",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!((s, &b["cleared"]), (StatusCode::OK, &json!(true)), "{b}");
    let (_, _, b) = app
        .call(
            Method::DELETE,
            "/v1/limits/kind/export",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(b["cleared"], json!(false));
    let (_, _, list) = app
        .call(Method::GET, "/v1/limits", Some(&op), None, &[])
        .await;
    assert_eq!(list, json!([]));
    // An ordered group: set, listed as ordered, and a later item of a
    // group names the earlier one it waits behind.
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/limits/group/chain",
            Some(&op),
            Some(json!({"concurrency": 1, "ordered": true, "on_dead_letter": "hold"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (&b["ordered"], &b["on_dead_letter"]),
        (&json!(true), &json!("hold"))
    );
    let mut chain = Vec::new();
    for _ in 0..2 {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(&op),
                Some(json!({"kind": "chain", "group": "g1"})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        chain.push(b["id"].as_str().expect("id").to_owned());
    }
    let (_, _, b) = app
        .call(
            Method::GET,
            &format!("/v1/items/{}", chain[1]),
            Some(&op),
            None,
            &[],
        )
        .await;
    let earlier = b["waiting"]
        .as_array()
        .expect("waiting")
        .iter()
        .find(|w| w["reason"] == "earlier_in_group")
        .unwrap_or_else(|| panic!("an earlier item: {b}"));
    assert!(
        earlier["detail"]
            .as_str()
            .expect("detail")
            .contains(&chain[0]),
        "{earlier}"
    );
    let (_, _, list) = app
        .call(Method::GET, "/v1/limits", Some(&op), None, &[])
        .await;
    assert_eq!(list[0]["ordered"], json!(true), "{list}");
}

/// Rates over HTTP: an operator sets one, the listing shows it with when
/// it next allows a start, it is cleared;
/// a viewer and a tenant-scoped token may not set one; a bad scope or rate
/// is the caller's 400.
pub async fn rates_set_list_clear(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let scoped = app
        .token(Role::Operator, Some(uuid::Uuid::from_u128(5)), &["*"])
        .await;
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/rates/kind/export",
            Some(&op),
            Some(json!({"count": 1, "period_ms": 3_600_000, "burst": 2})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["rate"].as_str(), b["source"].as_str()),
        (Some("1/1h burst 2"), Some("operator"))
    );
    let (s, _, list) = app
        .call(Method::GET, "/v1/rates", Some(&viewer), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(b["set_by_label"], "test", "{b}");
    assert_eq!(list[0]["set_by_label"], "test", "{list}");
    assert_eq!(list[0]["set_by"], b["set_by"], "{list}");
    assert!(list[0]["next_start_at"].is_null(), "{list}");
    for (who, want) in [
        (&viewer, StatusCode::FORBIDDEN),
        (&scoped, StatusCode::FORBIDDEN),
    ] {
        let (s, _, b) = app
            .call(
                Method::PUT,
                "/v1/rates/kind/export",
                Some(who),
                Some(json!({"count": 9, "period_ms": 1000})),
                &[],
            )
            .await;
        assert_eq!(s, want, "{b}");
    }
    let (s, _, b) = app
        .call(Method::GET, "/v1/rates", Some(&scoped), None, &[])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    for (path, body) in [
        (
            "/v1/rates/queue/export",
            json!({"count": 1, "period_ms": 1000}),
        ),
        (
            "/v1/rates/kind/Not%20A%20Kind",
            json!({"count": 1, "period_ms": 1000}),
        ),
        (
            "/v1/rates/kind/export",
            json!({"count": 0, "period_ms": 1000}),
        ),
        ("/v1/rates/kind/export", json!({"count": 1, "period_ms": 0})),
        (
            "/v1/rates/kind/export",
            json!({"count": 1, "period_ms": 1000, "burst": 0}),
        ),
        (
            "/v1/rates/kind/export",
            json!({"count": 5000, "period_ms": 1}),
        ),
        ("/v1/rates/kind/export", json!({"rate": "10/1s"})),
    ] {
        let (s, _, b) = app
            .call(Method::PUT, path, Some(&op), Some(body.clone()), &[])
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {body}: {b}");
    }
    let (s, _, b) = app
        .call(
            Method::DELETE,
            "/v1/rates/kind/export",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(
        (s, b["cleared"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{b}"
    );
    let (s, _, b) = app
        .call(
            Method::DELETE,
            "/v1/rates/kind/export",
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(
        (s, b["cleared"].as_bool()),
        (StatusCode::OK, Some(false)),
        "{b}"
    );
    let (_, _, list) = app
        .call(Method::GET, "/v1/rates", Some(&op), None, &[])
        .await;
    assert_eq!(list, json!([]));
}

/// Closures over HTTP: an operator closes a group until a time, the
/// listing shows it, a reopen says it was in force, then that nothing is;
/// a viewer and a tenant-scoped token may not close; a bad kind, group or
/// body is the caller's 400.
pub async fn closures_close_list_reopen(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let scoped = app
        .token(Role::Operator, Some(uuid::Uuid::from_u128(5)), &["*"])
        .await;
    let body = json!({"until": "2999-01-02T03:04:05Z", "group": "g1"});
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/closures/call",
            Some(&op),
            Some(body.clone()),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["group"].as_str(), b["until"].as_str()),
        (Some("g1"), Some("2999-01-02T03:04:05Z"))
    );
    assert!(b["closed_by_item"].is_null(), "{b}");
    let (s, _, list) = app
        .call(Method::GET, "/v1/closures", Some(&viewer), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(b["closed_by_label"], "test", "{b}");
    assert_eq!(list[0]["closed_by_label"], "test", "{list}");
    for who in [&viewer, &scoped] {
        let (s, _, b) = app
            .call(
                Method::PUT,
                "/v1/closures/call",
                Some(who),
                Some(body.clone()),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    }
    for (path, bad) in [
        (
            "/v1/closures/Not%20A%20Kind",
            json!({"until": "2999-01-02T03:04:05Z"}),
        ),
        ("/v1/closures/call", json!({"until": "soon"})),
        (
            "/v1/closures/call",
            json!({"until": "2999-01-02T03:04:05Z", "group": "a@b"}),
        ),
        (
            "/v1/closures/call",
            json!({"until": "2999-01-02T03:04:05Z", "x": 1}),
        ),
    ] {
        let (s, _, b) = app
            .call(Method::PUT, path, Some(&op), Some(bad.clone()), &[])
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {bad}: {b}");
    }
    for want in [true, false] {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/closures/call/reopen",
                Some(&op),
                Some(json!({"group": "g1"})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["reopened"], json!(want), "{b}");
    }
    let (_, _, list) = app
        .call(Method::GET, "/v1/closures", Some(&op), None, &[])
        .await;
    assert_eq!(list, json!([]));
    // A lane's pause and resume name their actor too.
    for (verb, paused) in [("pause", true), ("resume", false)] {
        let (s, _, b) = app
            .call(
                Method::POST,
                &format!("/v1/lanes/calls/{verb}"),
                Some(&op),
                None,
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["paused"], json!(paused), "{b}");
        assert_eq!(b["changed_by_label"], "test", "{b}");
        assert!(b["changed_by"].is_string(), "{b}");
    }
}

/// Expands to one test per API case over the app `$setup` builds.
#[macro_export]
macro_rules! api_suite {
    ($setup:path) => {
        $crate::api_suite!(@cases $setup;
            enqueue_list_show_cancel_retry,
            roles_grants_and_read_only,
            problems_oversize_and_unknown_kinds,
            idempotency_replay_and_mismatch,
            idempotency_fifty_concurrent_one_item,
            idempotency_in_flight_conflict_then_replay,
            gathering_many_requests_few_commits,
            bulk_and_cursor_pages,
            tenant_scoped_token_sees_its_tenant_only,
            limits_set_list_clear,
            rates_set_list_clear,
            fairness_set_list_clear,
            closures_close_list_reopen,
            dependencies_and_batches,
            contract_payload_is_any_json_value,
            contract_bodies_are_parsed_strictly,
            contract_idempotency_fingerprint_is_canonical_json,
            contract_problems_name_the_request_member,
            unique_while_active_over_http,
        );
    };
    (@cases $setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let app = $setup().await;
                $crate::api_cases::$case(&app).await;
                app.finish().await;
            }
        )*
    };
}
