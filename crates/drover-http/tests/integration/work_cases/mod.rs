//! The worker routes' cases every backend runs (`work_memory`,
//! `work_sqlite`, `work_postgres` call [`work_suite!`]): claims, the
//! fenced writes after them, long polls, drain, liveness, flow control,
//! and what a worker token may and may not reach.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode};
use drover::{NewItem, Status};
use drover_http::tokens::{self, TokenGrant};
use drover_http::{HttpConfig, Role, TokenSecret};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::common::{App, send};

mod results;
pub use results::*;

/// An app whose router drains on `drain`, with a worker token.
pub struct WorkApp {
    pub app: App,
    pub router: Router,
    pub drain: CancellationToken,
    pub worker: TokenSecret,
}

impl WorkApp {
    pub async fn over(app: App) -> WorkApp {
        let worker = mint_worker(&app, &["jobs:*", "mail:mail.send"]).await;
        let drain = CancellationToken::new();
        let config = HttpConfig {
            shutdown: drain.clone(),
            ..HttpConfig::default()
        };
        let auth = tokens::auth_from_store(&app.queue).await.unwrap();
        let router = drover_http::router_with(app.queue.clone(), auth, config);
        WorkApp {
            app,
            router,
            drain,
            worker,
        }
    }

    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        token: &TokenSecret,
        body: Option<Value>,
    ) -> (StatusCode, HeaderMap, Value) {
        let raw = body.map(|b| serde_json::to_vec(&b).unwrap());
        send(&self.router, method, uri, Some(token), raw, &[]).await
    }

    pub async fn post(&self, uri: &str, token: &TokenSecret, body: Value) -> (StatusCode, Value) {
        let (s, _, b) = self.call(Method::POST, uri, token, Some(body)).await;
        (s, b)
    }

    /// Claims from `lanes` as worker `id`; panics unless 200.
    pub async fn claim(&self, id: &str, lanes: &[&str], max: u32, extra: Value) -> Vec<Value> {
        let mut body = json!({"worker_id": id, "lanes": lanes, "max": max});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let (s, b) = self.post("/v1/work/claim", &self.worker, body).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        b["items"].as_array().unwrap().clone()
    }

    pub async fn enqueue(&self, kind: &str, lane: &str) -> Uuid {
        let item = NewItem::new(kind, json!({"n": 1})).with_lane(lane);
        self.app
            .queue
            .enqueue_item(&drover::queue::Principal::system(), item)
            .await
            .unwrap()
            .item
            .id
    }

    pub async fn finish(self) {
        self.app.finish().await;
    }
}

pub async fn mint_worker(app: &App, work: &[&str]) -> TokenSecret {
    let (secret, _) = tokens::create(
        &app.queue,
        &TokenGrant {
            role: Role::Worker,
            tenant: None,
            enqueue: vec![],
            label: "http worker".into(),
            work: work.iter().map(|s| (*s).to_owned()).collect(),
        },
    )
    .await
    .expect("worker token");
    secret
}

fn handle(item: &Value) -> Value {
    json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]})
}

fn uri(item: &Value, what: &str) -> String {
    format!("/v1/work/items/{}/{what}", item["id"].as_str().unwrap())
}

async fn status_of(w: &WorkApp, item: &Value) -> drover::Item {
    let id = Uuid::parse_str(item["id"].as_str().unwrap()).unwrap();
    w.app.queue.get(Uuid::nil(), id).await.unwrap()
}

/// A claim hands out items under a lease with a claim token; complete,
/// fail (retryable and not), defer, release and renew each land once
/// through the fence, and a second write with the same claim answers 409
/// and changes nothing.
pub async fn claim_and_every_fenced_write(w: &WorkApp) {
    for _ in 0..5 {
        w.enqueue("job.a", "jobs").await;
    }
    let items = w
        .claim("w1", &["jobs"], 5, json!({"lease_ms": 60000}))
        .await;
    assert_eq!(items.len(), 5);
    for i in &items {
        assert_eq!(i["attempt"], 1);
        assert_eq!(i["lane"], "jobs");
        assert!(i["fencing_token"].as_i64().unwrap() >= 1);
        assert!(i["lease_expires_at"].is_string());
    }
    let row = status_of(w, &items[0]).await;
    assert_eq!(
        (row.status, row.claimed_by.as_deref()),
        (Status::Claimed, Some("w1"))
    );

    // complete
    let (s, b) = w
        .post(&uri(&items[0], "complete"), &w.worker, handle(&items[0]))
        .await;
    assert_eq!((s, &b["status"]), (StatusCode::OK, &json!("done")), "{b}");
    // fail, retryable: requeued with one attempt spent
    let mut f = handle(&items[1]);
    f["error"] = json!("boom");
    let (s, b) = w.post(&uri(&items[1], "fail"), &w.worker, f.clone()).await;
    assert_eq!(
        (s, &b["outcome"]),
        (StatusCode::OK, &json!("requeued")),
        "{b}"
    );
    let row = status_of(w, &items[1]).await;
    assert_eq!((row.status, row.attempts), (Status::Pending, 1));
    assert_eq!(row.last_error.as_deref(), Some("boom"));
    // fail, not retryable: dead-lettered
    let mut f2 = handle(&items[2]);
    f2["error"] = json!("bad input");
    f2["retryable"] = json!(false);
    let (s, b) = w.post(&uri(&items[2], "fail"), &w.worker, f2).await;
    assert_eq!(
        (s, &b["outcome"]),
        (StatusCode::OK, &json!("dead_lettered")),
        "{b}"
    );
    assert_eq!(status_of(w, &items[2]).await.status, Status::Failed);
    // defer: pending, no attempt spent
    let mut d = handle(&items[3]);
    d["delay_ms"] = json!(3_600_000);
    let (s, b) = w.post(&uri(&items[3], "defer"), &w.worker, d.clone()).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let row = status_of(w, &items[3]).await;
    assert_eq!((row.status, row.attempts), (Status::Pending, 0));
    // renew, then release
    let mut r = handle(&items[4]);
    r["lease_ms"] = json!(120_000);
    let (s, b) = w.post(&uri(&items[4], "renew"), &w.worker, r.clone()).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let renewed: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(b["lease_expires_at"].clone()).unwrap();
    let first: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(items[4]["lease_expires_at"].clone()).unwrap();
    assert!(renewed > first, "{renewed} > {first}");
    let mut rel = handle(&items[4]);
    rel["note"] = json!("shutting down");
    let (s, b) = w
        .post(&uri(&items[4], "release"), &w.worker, rel.clone())
        .await;
    assert_eq!(
        (s, &b["status"]),
        (StatusCode::OK, &json!("pending")),
        "{b}"
    );
    let row = status_of(w, &items[4]).await;
    assert_eq!((row.status, row.attempts), (Status::Pending, 0));

    // Every write again with the same (now spent) claim: 409, nothing changes.
    let before: Vec<_> = futures_rows(w, &items).await;
    let again = [
        (uri(&items[0], "complete"), handle(&items[0])),
        (uri(&items[1], "fail"), f),
        (uri(&items[3], "defer"), d),
        (uri(&items[4], "renew"), r),
        (uri(&items[4], "release"), rel),
    ];
    for (u, body) in again {
        let (s, b) = w.post(&u, &w.worker, body).await;
        assert_eq!(s, StatusCode::CONFLICT, "{u}: {b}");
        assert_eq!(b["type"], "urn:drover:problem:conflict");
    }
    assert_eq!(
        futures_rows(w, &items).await,
        before,
        "a stale write changed a row"
    );
}

async fn futures_rows(w: &WorkApp, items: &[Value]) -> Vec<(Status, i32, i64, Option<String>)> {
    let mut out = Vec::new();
    for i in items {
        let r = status_of(w, i).await;
        out.push((r.status, r.attempts, r.claim_seq, r.last_error));
    }
    out
}

/// A forged claim token, or the right token under the wrong tenant, is
/// refused with 409 and leaves the claim in place; a completion carrying
/// a result over 256 KiB is refused naming `result`.
pub async fn forged_claims_change_nothing(w: &WorkApp) {
    w.enqueue("job.a", "jobs").await;
    let items = w.claim("w1", &["jobs"], 1, json!({})).await;
    let item = &items[0];
    let forged = json!({"tenant_id": item["tenant_id"], "claim_token": Uuid::new_v4()});
    let other_tenant = json!({"tenant_id": Uuid::from_u128(7), "claim_token": item["claim_token"]});
    for body in [forged, other_tenant] {
        let (s, b) = w.post(&uri(item, "complete"), &w.worker, body).await;
        assert_eq!(s, StatusCode::CONFLICT, "{b}");
    }
    let mut with_result = handle(item);
    with_result["result"] = json!("x".repeat(257 * 1024));
    let (s, b) = w.post(&uri(item, "complete"), &w.worker, with_result).await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("result")),
        "{b}"
    );
    let mut nul = handle(item);
    nul["error"] = json!("bad\u{0}byte");
    let (s, b) = w.post(&uri(item, "fail"), &w.worker, nul).await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("error")),
        "{b}"
    );
    let row = status_of(w, item).await;
    assert_eq!(row.status, Status::Claimed, "the claim is untouched");
    let (s, b) = w
        .post(&uri(item, "complete"), &w.worker, handle(item))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// A worker whose lease passed is stale: once the sweep hands the item
/// back and another worker claims it, the first one's late complete
/// answers 409 and the second one's claim is untouched and completes.
pub async fn a_late_complete_after_the_lease_is_refused(w: &WorkApp) {
    w.enqueue("job.a", "jobs").await;
    let first = w
        .claim("slow", &["jobs"], 1, json!({"lease_ms": 1000}))
        .await;
    w.app.harness.pass(Duration::from_millis(1100)).await;
    let swept = w.app.queue.requeue_stale(100).await.unwrap();
    assert_eq!(swept.requeued, 1);
    // The sweep requeues after the policy's nominal first delay (1 s).
    w.app.harness.pass(Duration::from_millis(1100)).await;
    let second = w.claim("fast", &["jobs"], 1, json!({})).await;
    assert_eq!(second[0]["id"], first[0]["id"]);
    assert!(second[0]["fencing_token"].as_i64() > first[0]["fencing_token"].as_i64());
    assert_eq!(second[0]["attempt"], 2);
    let (s, b) = w
        .post(&uri(&first[0], "complete"), &w.worker, handle(&first[0]))
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    let row = status_of(w, &first[0]).await;
    assert_eq!(
        (row.status, row.claimed_by.as_deref()),
        (Status::Claimed, Some("fast"))
    );
    let (s, b) = w
        .post(&uri(&second[0], "complete"), &w.worker, handle(&second[0]))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// A batch completion lands each live claim and lists the stale ones.
pub async fn batch_complete_lists_the_stale(w: &WorkApp) {
    for _ in 0..3 {
        w.enqueue("job.a", "jobs").await;
    }
    let items = w.claim("w1", &["jobs"], 3, json!({})).await;
    let (s, b) = w
        .post(&uri(&items[0], "complete"), &w.worker, handle(&items[0]))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let all: Vec<Value> = items
        .iter()
        .map(|i| json!({"id": i["id"], "tenant_id": i["tenant_id"], "claim_token": i["claim_token"]}))
        .collect();
    let (s, b) = w
        .post("/v1/work/complete", &w.worker, json!({"items": all}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["completed"].as_array().unwrap().len(), 2, "{b}");
    assert_eq!(b["stale"], json!([items[0]["id"]]));
    let (s, b) = w
        .post("/v1/work/complete", &w.worker, json!({"items": []}))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
}

/// Concurrent completions are gathered, and each still answers for its
/// own claim: 20 items completed twice each at once land once each (20
/// answers 200, 20 answer 409).
pub async fn concurrent_completions_land_once_each(w: &WorkApp) {
    for _ in 0..20 {
        w.enqueue("job.a", "jobs").await;
    }
    let items = w.claim("w1", &["jobs"], 20, json!({})).await;
    assert_eq!(items.len(), 20);
    let mut tasks = tokio::task::JoinSet::new();
    for item in items.iter().chain(items.iter()) {
        let (router, token) = (w.router.clone(), w.worker.clone());
        let (path, body) = (uri(item, "complete"), handle(item));
        tasks.spawn(async move {
            send(
                &router,
                Method::POST,
                &path,
                Some(&token),
                Some(serde_json::to_vec(&body).unwrap()),
                &[],
            )
            .await
        });
    }
    let (mut ok, mut stale) = (0, 0);
    while let Some(s) = tasks.join_next().await {
        match s.unwrap() {
            (StatusCode::OK, ..) => ok += 1,
            (StatusCode::CONFLICT, ..) => stale += 1,
            (other, _, body) => panic!("a completion answered {other}: {body}"),
        }
    }
    assert_eq!((ok, stale), (20, 20));
    for i in &items {
        assert_eq!(status_of(w, i).await.status, Status::Done);
    }
}

/// A long poll on an empty lane answers once work lands (woken by the
/// store's wake-ups), and one whose wait runs out answers 200 with no
/// items.
pub async fn long_poll_answers_when_work_lands(w: &WorkApp) {
    let router = w.router.clone();
    let token = w.worker.clone();
    let poll = tokio::spawn(async move {
        let body = json!({"worker_id": "poller", "lanes": ["jobs"], "max": 10, "wait_ms": 30000});
        send(
            &router,
            Method::POST,
            "/v1/work/claim",
            Some(&token),
            Some(serde_json::to_vec(&body).unwrap()),
            &[],
        )
        .await
    });
    let id = w.enqueue("job.a", "jobs").await;
    let (s, _, b) = poll.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["items"][0]["id"], json!(id));
    let items = w
        .claim("poller", &["jobs"], 1, json!({"wait_ms": 10}))
        .await;
    assert!(items.is_empty());
}

/// Drain: a long poll in progress ends with 503 and `Retry-After`, and
/// so does every claim after it; writes after a claim are still served.
pub async fn drain_ends_long_polls_with_503(w: &WorkApp) {
    w.enqueue("job.a", "jobs").await;
    let held = w.claim("w1", &["jobs"], 1, json!({})).await;
    let router = w.router.clone();
    let token = w.worker.clone();
    let poll = tokio::spawn(async move {
        let body = json!({"worker_id": "poller", "lanes": ["jobs"], "wait_ms": 60000});
        send(
            &router,
            Method::POST,
            "/v1/work/claim",
            Some(&token),
            Some(serde_json::to_vec(&body).unwrap()),
            &[],
        )
        .await
    });
    w.drain.cancel();
    let (s, h, b) = poll.await.unwrap();
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert_eq!(h.get("retry-after").unwrap(), "1");
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "late", "lanes": ["jobs"]}),
        )
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    let (s, b) = w
        .post(&uri(&held[0], "complete"), &w.worker, handle(&held[0]))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// An HTTP worker is listed in the workers table while it claims, and
/// reads `offline` after its goodbye.
pub async fn http_workers_in_the_workers_table(w: &WorkApp) {
    w.claim(
        "http-w1",
        &["jobs"],
        1,
        json!({"capacity": 20, "kinds": ["job.a"]}),
    )
    .await;
    let (s, _, b) = w.call(Method::GET, "/v1/workers", &w.app.admin, None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let row = b
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "http-w1")
        .cloned();
    let row = row.unwrap_or_else(|| panic!("no row for http-w1: {b}"));
    assert_eq!(row["state"], "running", "{row}");
    assert_eq!(row["capacity"], 20, "{row}");
    assert_eq!(row["lanes"], json!(["jobs"]), "{row}");
    // Another token's worker cannot mark it offline.
    let other = mint_worker(&w.app, &["jobs:*"]).await;
    let path = "/v1/work/workers/http-w1/stop";
    let (s, _, b) = w.call(Method::POST, path, &other, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, _, b) = w
        .call(
            Method::POST,
            "/v1/work/workers/http-w1/stop",
            &w.worker,
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    let rows = w.app.queue.workers().await.unwrap();
    let row = rows.iter().find(|r| r.id == "http-w1").unwrap();
    assert_eq!(row.state, "offline");
}

/// A flow-control limit bounds HTTP claims as it bounds native ones: the
/// claim goes through the same `Queue::claim`.
pub async fn flow_limits_bound_http_claims(w: &WorkApp) {
    let op = w.app.token(Role::Operator, None, &["*"]).await;
    let (s, _, b) = w
        .call(
            Method::PUT,
            "/v1/limits/kind/job.limited",
            &op,
            Some(json!({"concurrency": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    for _ in 0..5 {
        w.enqueue("job.limited", "jobs").await;
    }
    let first = w.claim("w1", &["jobs"], 5, json!({})).await;
    assert_eq!(first.len(), 2, "the limit holds the rest back");
    assert!(w.claim("w2", &["jobs"], 5, json!({})).await.is_empty());
    let (s, b) = w
        .post(&uri(&first[0], "complete"), &w.worker, handle(&first[0]))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(w.claim("w2", &["jobs"], 5, json!({})).await.len(), 1);
}

fn entry(item: &Value) -> Value {
    json!({"id": item["id"], "tenant_id": item["tenant_id"], "claim_token": item["claim_token"]})
}

/// A claim that carries its worker's completions writes them first, each
/// fenced on its own claim (a stale one is listed, not refused), then
/// claims; a refused claim writes none of them.
pub async fn a_claim_carries_its_completions(w: &WorkApp) {
    for _ in 0..3 {
        w.enqueue("job.a", "jobs").await;
    }
    let held = w.claim("w1", &["jobs"], 2, json!({})).await;
    let (s, b) = w
        .post(&uri(&held[0], "complete"), &w.worker, handle(&held[0]))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let carried = json!([entry(&held[0]), entry(&held[1])]);
    // Refused (max 0): nothing written.
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "w1", "lanes": ["jobs"], "max": 0, "complete": carried}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(status_of(w, &held[1]).await.status, Status::Claimed);
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "w1", "lanes": ["jobs"], "max": 5, "complete": carried}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["completed"], json!([held[1]["id"]]), "{b}");
    assert_eq!(b["stale"], json!([held[0]["id"]]), "{b}");
    assert_eq!(b["items"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(status_of(w, &held[1]).await.status, Status::Done);
    // Without `complete`, both lists are there and empty.
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "w1", "lanes": ["jobs"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["completed"].clone(), b["stale"].clone()),
        (json!([]), json!([]))
    );
}

/// Carried completions free their slots of a limit before the claim: at
/// a kind limit of 1, the worker holding the slot gets the next item in
/// the request that completes the one it holds.
pub async fn carried_completions_free_their_slots_first(w: &WorkApp) {
    let op = w.app.token(Role::Operator, None, &["*"]).await;
    let (s, _, b) = w
        .call(
            Method::PUT,
            "/v1/limits/kind/job.limited",
            &op,
            Some(json!({"concurrency": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    for _ in 0..2 {
        w.enqueue("job.limited", "jobs").await;
    }
    let first = w.claim("w1", &["jobs"], 2, json!({})).await;
    assert_eq!(first.len(), 1, "the limit holds the other back");
    let next = w
        .claim("w1", &["jobs"], 2, json!({"complete": [entry(&first[0])]}))
        .await;
    assert_eq!(next.len(), 1, "the carried completion freed the slot");
    assert_ne!(next[0]["id"], first[0]["id"]);
}

/// A long poll that carried completions and is ended by the drain
/// answers 200 with no items and says which landed (a 503 could not);
/// the next claim meets the 503.
pub async fn drain_answers_a_carrying_long_poll_with_its_completions(w: &WorkApp) {
    w.enqueue("job.a", "jobs").await;
    let held = w.claim("w1", &["jobs"], 1, json!({})).await;
    let router = w.router.clone();
    let token = w.worker.clone();
    let body = json!({"worker_id": "w1", "lanes": ["jobs"], "wait_ms": 60000,
                      "complete": [entry(&held[0])]});
    let poll = tokio::spawn(async move {
        send(
            &router,
            Method::POST,
            "/v1/work/claim",
            Some(&token),
            Some(serde_json::to_vec(&body).unwrap()),
            &[],
        )
        .await
    });
    // The completion lands before the poll waits: wait on the row.
    while status_of(w, &held[0]).await.status != Status::Done {
        tokio::task::yield_now().await;
    }
    w.drain.cancel();
    let (s, _, b) = poll.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["completed"], json!([held[0]["id"]]), "{b}");
    assert_eq!(b["items"], json!([]), "{b}");
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "w1", "lanes": ["jobs"]}),
        )
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
}

/// What a worker token may reach: only the worker routes, only its
/// grants' lanes and kinds; other roles cannot claim; grants are checked
/// at minting.
pub async fn worker_token_grants_and_roles(w: &WorkApp) {
    let get = |u: &'static str| async move { w.call(Method::GET, u, &w.worker, None).await.0 };
    for u in [
        "/v1/items",
        "/v1/lanes",
        "/v1/workers",
        "/v1/stats",
        "/v1/limits",
    ] {
        assert_eq!(get(u).await, StatusCode::FORBIDDEN, "{u}");
    }
    let (s, b) = w
        .post(
            "/v1/items",
            &w.worker,
            json!({"kind": "job.a", "lane": "jobs"}),
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    // Outside its grants: another lane; a kind not granted on the lane;
    // every kind on a lane whose grant names kinds.
    let refused = [
        json!({"worker_id": "w", "lanes": ["other"]}),
        json!({"worker_id": "w", "lanes": ["mail"], "kinds": ["mail.bulk"]}),
        json!({"worker_id": "w", "lanes": ["mail"]}),
        json!({"worker_id": "w", "lanes": ["jobs", "mail"]}),
    ];
    for body in refused {
        let (s, b) = w.post("/v1/work/claim", &w.worker, body.clone()).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{body}: {b}");
    }
    let (s, b) = w
        .post(
            "/v1/work/claim",
            &w.worker,
            json!({"worker_id": "w", "lanes": ["mail"], "kinds": ["mail.send"]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // No dashboard session either.
    let login = axum::http::Request::post("/ui/login")
        .header("host", "dash.test")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(axum::body::Body::from(format!(
            "token={}",
            w.worker.expose()
        )))
        .unwrap();
    let res = tower::ServiceExt::oneshot(w.router.clone(), login)
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FORBIDDEN,
        "a worker token opens no dashboard"
    );
    assert!(res.headers().get("set-cookie").is_none());
    // Operators and admins do not claim (mint a worker token).
    let op = w.app.token(Role::Operator, None, &["*"]).await;
    for t in [&op, &w.app.admin] {
        let (s, b) = w
            .post(
                "/v1/work/claim",
                t,
                json!({"worker_id": "w", "lanes": ["jobs"]}),
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    }
    // A worker token cannot settle with an operator's grants either.
    let id = Uuid::now_v7();
    let (s, b) = w
        .post(
            &format!("/v1/work/items/{id}/complete"),
            &op,
            json!({"tenant_id": Uuid::nil(), "claim_token": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    // Minting refuses grants in the wrong place.
    let grant = |role, tenant, work: &[&str]| TokenGrant {
        role,
        tenant,
        enqueue: vec![],
        label: String::new(),
        work: work.iter().map(|s| (*s).to_owned()).collect(),
    };
    for (g, field) in [
        (grant(Role::Worker, None, &[]), "work"),
        (grant(Role::Operator, None, &["jobs:*"]), "work"),
        (
            grant(Role::Worker, Some(Uuid::from_u128(3)), &["jobs:*"]),
            "tenant",
        ),
        (grant(Role::Worker, None, &["Jobs"]), "work"),
    ] {
        let e = tokens::create(&w.app.queue, &g).await.unwrap_err();
        assert!(
            matches!(&e, drover::Error::InvalidInput { field: f, .. } if *f == field),
            "{e}"
        );
    }
    // Bad claims are the caller's 400.
    for (body, field) in [
        (json!({"worker_id": "", "lanes": ["jobs"]}), "worker_id"),
        (json!({"worker_id": "w", "lanes": []}), "lanes"),
        (
            json!({"worker_id": "w", "lanes": ["jobs"], "max": 0}),
            "max",
        ),
        (
            json!({"worker_id": "w", "lanes": ["jobs"], "lease_ms": 10}),
            "lease_ms",
        ),
        (
            json!({"worker_id": "w", "lanes": ["jobs"], "wait_ms": 600000}),
            "wait_ms",
        ),
        (
            json!({"worker_id": "w", "lanes": ["jobs"], "surprise": 1}),
            "surprise",
        ),
    ] {
        let (s, b) = w.post("/v1/work/claim", &w.worker, body.clone()).await;
        assert_eq!(
            (s, b["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{body}: {b}"
        );
    }
}

/// Generates one test per case against `$setup` (an `App` builder).
#[macro_export]
macro_rules! work_suite {
    ($setup:path) => {
        $crate::work_suite!(@cases $setup;
            claim_and_every_fenced_write,
            forged_claims_change_nothing,
            a_late_complete_after_the_lease_is_refused,
            batch_complete_lists_the_stale,
            concurrent_completions_land_once_each,
            long_poll_answers_when_work_lands,
            drain_ends_long_polls_with_503,
            http_workers_in_the_workers_table,
            flow_limits_bound_http_claims,
            worker_token_grants_and_roles,
            a_claim_carries_its_completions,
            carried_completions_free_their_slots_first,
            drain_answers_a_carrying_long_poll_with_its_completions,
            results_and_progress_over_http,
            long_poll_on_an_item_answers_at_completion,
        );
    };
    (@cases $setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let w = $crate::work_cases::WorkApp::over($setup().await).await;
                $crate::work_cases::$case(&w).await;
                w.finish().await;
            }
        )*
    };
}
