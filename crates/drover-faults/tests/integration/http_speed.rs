//! Workers over HTTP beside native workers, on this machine (ignored by
//! default; run with `cargo test --release -p drover-faults --test
//! integration -- --ignored --nocapture http_speed::`): the local PostgreSQL
//! (`DATABASE_URL`), a fresh schema per phase, the API's router served on
//! loopback in this process (what `drover serve` runs), and a plain Rust
//! HTTP worker loop.
//!
//! 1. **Pickup at light load**: one `drover.noop` item at a time (the next
//!    after the last is done and a pause of 20-40 ms), from the enqueue's
//!    commit to the handler holding the item: an HTTP worker long-polling
//!    (`wait_ms` 30 s), then a native worker (capacity 1).
//! 2. **Drain**: 20,000 `drover.noop` items enqueued first, then drained
//!    by a native worker (capacity 20), and by HTTP worker loops with
//!    capacity 20 and batch claims: in rounds (claim up to 20, run them,
//!    complete them, claim again), and pipelined as a native worker runs
//!    (a slot frees when its handler returns; a completer task sends the
//!    completions), each with a request per completion and with batch
//!    completions.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use drover::queue::{JobContext, Principal};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use drover::{NewItem, Queue};
use serde_json::{Value, json};
use support::http::{self, Client, Server};
use tokio::sync::mpsc;

const DRAIN_ITEMS: usize = 20_000;
const PICKUPS: usize = 200;

/// A fresh schema with a pool of 16 (a native worker of capacity 20
/// needs 10; the HTTP server shares its pool the same way).
async fn fresh() -> (Queue, String) {
    use drover::Store;
    use drover::store::postgres::{PgOptions, PgStore};
    let schema = format!("drover_t_{}", uuid::Uuid::new_v4().simple());
    let store = PgStore::connect(
        &drover::testing::pg_owner_url().await,
        PgOptions {
            schema: schema.clone(),
            max_connections: 16,
            ..PgOptions::default()
        },
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    (Queue::new(std::sync::Arc::new(store)), schema)
}

async fn drop_schema(schema: &str) {
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, schema).await;
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn summary(v: &[f64]) -> String {
    format!(
        "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms (n {})",
        pct(v.to_vec(), 0.5),
        pct(v.to_vec(), 0.9),
        pct(v.to_vec(), 0.99),
        v.len()
    )
}

async fn enqueue_noops(q: &Queue, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        let items = (0..k)
            .map(|_| NewItem::new("drover.noop", Value::Null))
            .collect();
        q.enqueue_many(&Principal::system(), items).await.unwrap();
        left -= k;
    }
}

async fn done(q: &Queue) -> i64 {
    q.counts()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.kind == "drover.noop" && r.status == drover::Status::Done)
        .map(|r| r.count)
        .sum()
}

/// Sends the handler's start time to the test.
struct Timed(mpsc::UnboundedSender<Instant>);

impl Handler for Timed {
    type Job = drover::builtin::Noop;
    const STRATEGY: Strategy = Strategy {
        idempotency: "does nothing",
        retry: "none needed",
        checkpoint: "none",
        recovery: "runs again",
    };
    async fn handle(&self, _cx: &JobContext, _job: Self::Job) -> Outcome {
        let _ = self.0.send(Instant::now());
        Ok(Done::Completed)
    }
}

async fn pause() {
    tokio::time::sleep(Duration::from_millis(20 + rand::random::<u64>() % 20)).await;
}

async fn pickup_http() -> Vec<f64> {
    let (q, schema) = fresh().await;
    let (auth, token) = http::worker_auth(&["default"]);
    let server = Server::start(q.clone(), auth, "127.0.0.1:0".parse().unwrap()).await;
    let (tx, mut rx) = mpsc::unbounded_channel::<Instant>();
    let addr = server.addr;
    let worker = tokio::spawn(async move {
        let mut claims = Client::new(addr, &token);
        let mut completes = Client::new(addr, &token);
        let mut n = 0;
        while n < PICKUPS {
            let (s, b) = claims
                .post(
                    "/v1/work/claim",
                    &json!({"worker_id": "speed", "lanes": ["default"], "max": 1, "wait_ms": 30000}),
                )
                .await
                .unwrap();
            assert_eq!(s, StatusCode::OK, "{b}");
            for item in b["items"].as_array().unwrap() {
                let _ = tx.send(Instant::now());
                let (s, b) = completes
                    .post(
                        &format!("/v1/work/items/{}/complete", item["id"].as_str().unwrap()),
                        &json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]}),
                    )
                    .await
                    .unwrap();
                assert_eq!(s, StatusCode::OK, "{b}");
                n += 1;
            }
        }
    });
    let mut lat = Vec::with_capacity(PICKUPS);
    for _ in 0..PICKUPS {
        pause().await;
        q.enqueue_item(
            &Principal::system(),
            NewItem::new("drover.noop", Value::Null),
        )
        .await
        .unwrap();
        let committed = Instant::now();
        let started = rx.recv().await.unwrap();
        lat.push(started.saturating_duration_since(committed).as_secs_f64() * 1e3);
    }
    worker.await.unwrap();
    server.stop().await;
    drop_schema(&schema).await;
    lat
}

async fn pickup_native() -> Vec<f64> {
    let (q, schema) = fresh().await;
    let (tx, mut rx) = mpsc::unbounded_channel::<Instant>();
    let running = Worker::builder(q.clone())
        .lane("default")
        .capacity(1)
        .handler(Timed(tx))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let mut lat = Vec::with_capacity(PICKUPS);
    for _ in 0..PICKUPS {
        pause().await;
        q.enqueue_item(
            &Principal::system(),
            NewItem::new("drover.noop", Value::Null),
        )
        .await
        .unwrap();
        let committed = Instant::now();
        let started = rx.recv().await.unwrap();
        lat.push(started.saturating_duration_since(committed).as_secs_f64() * 1e3);
    }
    running.shutdown().await;
    drop_schema(&schema).await;
    lat
}

async fn drain_native() -> f64 {
    let (q, schema) = fresh().await;
    enqueue_noops(&q, DRAIN_ITEMS).await;
    let t = Instant::now();
    let running = Worker::builder(q.clone())
        .lane("default")
        .capacity(20)
        .builtins()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    while done(&q).await < DRAIN_ITEMS as i64 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = DRAIN_ITEMS as f64 / t.elapsed().as_secs_f64();
    running.shutdown().await;
    drop_schema(&schema).await;
    rate
}

/// The HTTP worker loop: claim up to 20 (one request), "run" them (noop),
/// complete them: 20 concurrent requests, or one batch completion.
async fn drain_http(batch_complete: bool) -> f64 {
    let (q, schema) = fresh().await;
    enqueue_noops(&q, DRAIN_ITEMS).await;
    let (auth, token) = http::worker_auth(&["default"]);
    let server = Server::start(q.clone(), auth, "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let t = Instant::now();
    let mut claims = Client::new(addr, &token);
    let mut completers: Vec<Client> = (0..20).map(|_| Client::new(addr, &token)).collect();
    let mut n = 0;
    while n < DRAIN_ITEMS {
        let (s, b) = claims
            .post(
                "/v1/work/claim",
                &json!({"worker_id": "speed", "lanes": ["default"], "max": 20, "wait_ms": 1000, "capacity": 20}),
            )
            .await
            .unwrap();
        assert_eq!(s, StatusCode::OK, "{b}");
        let items = b["items"].as_array().unwrap().clone();
        n += items.len();
        if batch_complete {
            let all: Vec<Value> = items
                .iter()
                .map(|i| json!({"id": i["id"], "tenant_id": i["tenant_id"], "claim_token": i["claim_token"]}))
                .collect();
            if !all.is_empty() {
                let (s, b) = completers[0]
                    .post("/v1/work/complete", &json!({"items": all}))
                    .await
                    .unwrap();
                assert_eq!(s, StatusCode::OK, "{b}");
                assert!(b["stale"].as_array().unwrap().is_empty());
            }
        } else {
            let mut tasks = tokio::task::JoinSet::new();
            for (item, mut c) in items.iter().cloned().zip(completers.drain(..)) {
                tasks.spawn(async move {
                    let (s, b) = c
                        .post(
                            &format!("/v1/work/items/{}/complete", item["id"].as_str().unwrap()),
                            &json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]}),
                        )
                        .await
                        .unwrap();
                    assert_eq!(s, StatusCode::OK, "{b}");
                    c
                });
            }
            while let Some(c) = tasks.join_next().await {
                completers.push(c.unwrap());
            }
            while completers.len() < 20 {
                completers.push(Client::new(addr, &token));
            }
        }
    }
    let rate = DRAIN_ITEMS as f64 / t.elapsed().as_secs_f64();
    assert_eq!(done(&q).await, DRAIN_ITEMS as i64);
    server.stop().await;
    drop_schema(&schema).await;
    rate
}

/// The HTTP worker loop as a native worker runs: up to 20 handlers at
/// once, a slot freed when its handler returns; claims of as many items as
/// slots are free; completions sent by a completer task, as one batch
/// request per round (`batch`) or one request per item on up to 20
/// connections (gathered by the server).
async fn drain_http_pipelined(batch: bool) -> f64 {
    let (q, schema) = fresh().await;
    enqueue_noops(&q, DRAIN_ITEMS).await;
    let (auth, token) = http::worker_auth(&["default"]);
    let server = Server::start(q.clone(), auth, "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.addr;
    let t = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(20));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Value>();
    let completer_token = token.clone();
    let completer = tokio::spawn(async move {
        let mut clients: Vec<Client> = (0..20)
            .map(|_| Client::new(addr, &completer_token))
            .collect();
        let mut n = 0;
        while n < DRAIN_ITEMS {
            let Some(first) = done_rx.recv().await else {
                break;
            };
            let mut round = vec![first];
            while let Ok(more) = done_rx.try_recv() {
                round.push(more);
            }
            n += round.len();
            if batch {
                let all: Vec<Value> = round
                    .iter()
                    .map(|i| json!({"id": i["id"], "tenant_id": i["tenant_id"], "claim_token": i["claim_token"]}))
                    .collect();
                for chunk in all.chunks(1000) {
                    let (s, b) = clients[0]
                        .post("/v1/work/complete", &json!({"items": chunk}))
                        .await
                        .unwrap();
                    assert_eq!(s, StatusCode::OK, "{b}");
                }
            } else {
                for chunk in round.chunks(20) {
                    let mut tasks = tokio::task::JoinSet::new();
                    for (item, mut c) in chunk.iter().cloned().zip(clients.drain(..)) {
                        tasks.spawn(async move {
                            let (s, b) = c
                                .post(
                                    &format!("/v1/work/items/{}/complete", item["id"].as_str().unwrap()),
                                    &json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]}),
                                )
                                .await
                                .unwrap();
                            assert_eq!(s, StatusCode::OK, "{b}");
                            c
                        });
                    }
                    while let Some(c) = tasks.join_next().await {
                        clients.push(c.unwrap());
                    }
                    while clients.len() < 20 {
                        clients.push(Client::new(addr, &completer_token));
                    }
                }
            }
        }
    });
    let mut claims = Client::new(addr, &token);
    let mut claimed = 0;
    while claimed < DRAIN_ITEMS {
        let first = slots.clone().acquire_owned().await.unwrap();
        let mut permits = vec![first];
        while let Ok(p) = slots.clone().try_acquire_owned() {
            permits.push(p);
        }
        let (s, b) = claims
            .post(
                "/v1/work/claim",
                &json!({"worker_id": "speed", "lanes": ["default"], "max": permits.len(), "wait_ms": 1000, "capacity": 20}),
            )
            .await
            .unwrap();
        assert_eq!(s, StatusCode::OK, "{b}");
        for item in b["items"].as_array().unwrap().iter().cloned() {
            claimed += 1;
            let permit = permits.pop().unwrap();
            let done = done_tx.clone();
            tokio::spawn(async move {
                // The handler: drover.noop does nothing.
                let _ = done.send(item);
                drop(permit);
            });
        }
    }
    completer.await.unwrap();
    let rate = DRAIN_ITEMS as f64 / t.elapsed().as_secs_f64();
    assert_eq!(done(&q).await, DRAIN_ITEMS as i64);
    server.stop().await;
    drop_schema(&schema).await;
    rate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --release -- --ignored --nocapture"]
async fn http_workers_beside_native() {
    let http_pickup = pickup_http().await;
    let native_pickup = pickup_native().await;
    eprintln!(
        "SPEED | pickup at light load, commit -> handler | HTTP long poll {}",
        summary(&http_pickup)
    );
    eprintln!(
        "SPEED | pickup at light load, commit -> handler | native {}",
        summary(&native_pickup)
    );
    let native = drain_native().await;
    let each = drain_http(false).await;
    let batch = drain_http(true).await;
    let piped_each = drain_http_pipelined(false).await;
    let piped_batch = drain_http_pipelined(true).await;
    eprintln!(
        "SPEED | drain {DRAIN_ITEMS} drover.noop, capacity 20 | native {native:.0} items/s | HTTP claim-run-complete rounds: a request per completion {each:.0} items/s, a batch completion {batch:.0} items/s | HTTP pipelined (slot freed when the handler returns, a completer task): a request per completion {piped_each:.0} items/s, batch completions {piped_batch:.0} items/s"
    );
}
