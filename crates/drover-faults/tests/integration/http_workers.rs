//! Workers over HTTP under the faults native workers pass: a worker killed
//! mid-item, a worker paused past its lease, the server restarted under
//! load. The API's router is served on loopback over a throwaway
//! PostgreSQL cluster (what `drover serve` runs); the HTTP workers drive
//! the protocol of docs/http.md from Rust (`support/http.rs`), their
//! handlers logging each start and writing each effect through the fenced
//! write, so the checker's figures apply unchanged; a sweep task hands
//! lapsed leases back as a native worker's sweep does.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use drover_faults::checker;
use drover_faults::effects::{EffectsDb, Op};
use drover_faults::procs::Proc;
use serde_json::json;
use support::http::{self, Client, Counts, Server, WorkerSpec};
use support::{Run, SCHEMA, report};
use tokio_util::sync::CancellationToken;

const SWEEP: Duration = Duration::from_millis(250);
const HTTP_BIN: &str = env!("CARGO_BIN_EXE_drover-fault-http-worker");

async fn effects_db(run: &Run) -> EffectsDb {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect(&run.cluster().url())
        .await
        .expect("effects pool");
    EffectsDb::Pg {
        pool,
        schema: SCHEMA.into(),
    }
}

fn spec(id: &str, lanes: &[&str], capacity: usize, lease_ms: u64, wait_ms: u64) -> WorkerSpec {
    WorkerSpec {
        id: id.into(),
        lanes: lanes.iter().map(|l| (*l).to_owned()).collect(),
        capacity,
        lease_ms,
        wait_ms,
    }
}

async fn until(what: &str, limit: Duration, mut ok: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !ok().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn scalar(run: &Run, sql: &str) -> i64 {
    sqlx::query_scalar::<_, Option<i64>>(sql)
        .fetch_one(run.pg_pool())
        .await
        .unwrap_or(Some(-1))
        .unwrap_or(0)
}

/// An HTTP worker process killed with SIGKILL mid-item: its leases pass,
/// the sweep hands the items back, another HTTP worker completes them.
/// Lost 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_worker_killed_mid_item_postgres() {
    let run = Run::pg().await;
    run.enqueue("effects.write", 40, 400, 10).await;
    let (auth, token) = http::worker_auth(&["default"]);
    let server = Server::start(run.queue.clone(), auth, "127.0.0.1:0".parse().unwrap()).await;
    let db = effects_db(&run).await;
    let stop = CancellationToken::new();
    let sweep = http::sweeper(run.queue.clone(), SWEEP, stop.clone());

    // A is a process of its own, killed with SIGKILL mid-item.
    let args: Vec<String> = [
        "--addr",
        &server.addr.to_string(),
        "--token",
        &token,
        "--id",
        "http-a",
        "--capacity",
        "5",
        "--lease-ms",
        "2000",
        "--wait-ms",
        "1000",
        "--database-url",
        &run.cluster().url(),
        "--schema",
        SCHEMA,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut a = Proc::spawn(
        std::path::Path::new(HTTP_BIN),
        &args,
        &run.dir.path().join("http-a.log"),
    );
    until("A starts items", Duration::from_secs(60), async || {
        run.starts().await >= 5
    })
    .await;
    a.kill9();
    let killed_at = chrono::Utc::now();
    let held = scalar(
        &run,
        "SELECT count(*) FROM drover.items WHERE claimed_by = 'http-a'",
    )
    .await;

    let b_counts = Arc::new(Counts::default());
    let b_stop = CancellationToken::new();
    let b = tokio::spawn(http::run_worker(
        server.addr,
        token.clone(),
        spec("http-b", &["default"], 10, 30_000, 1_000),
        db.clone(),
        b_counts.clone(),
        b_stop.clone(),
    ));
    assert!(
        run.wait_final(Duration::from_secs(120)).await,
        "every item final"
    );
    b_stop.cancel();
    b.await.unwrap();
    stop.cancel();
    let rescued = sweep.await.unwrap();
    server.stop().await;

    let f = run.figures().await;
    let lapsed = checker::pg_lapsed_writes_accepted(run.pg_pool(), SCHEMA)
        .await
        .unwrap();
    let a_late = checker::pg_holder_writes_after(run.pg_pool(), SCHEMA, "http-a", killed_at)
        .await
        .unwrap();
    let by_b = scalar(
        &run,
        "SELECT count(*) FROM drover.transitions WHERE new_status = 'done' AND old_holder = 'http-b'",
    )
    .await;
    // Silent since the kill, A's row reads `lost` after two of its beat
    // intervals (its lease, 2 s, the longer of lease and wait).
    until("A's row reads lost", Duration::from_secs(30), async || {
        let rows = run.queue.workers().await.unwrap_or_default();
        rows.iter().any(|w| w.id == "http-a" && w.state == "lost")
    })
    .await;
    let b_row = run
        .queue
        .workers()
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.id == "http-b")
        .map(|w| w.state);
    report(
        "HTTP 1 worker killed mid-item (PostgreSQL)",
        "40 items x 400 ms, A (a process) capacity 5 lease 2 s SIGKILLed after 5 starts, B capacity 10",
        &format!(
            "{} | A held {held} at the kill | rescued by the sweep {rescued} | completed by B {by_b} | lapsed writes accepted {lapsed} | A writes after the kill {a_late} | A's row lost, B's {b_row:?}",
            f.row()
        ),
    );
    f.assert_promises_kept();
    assert_eq!(f.done, 40);
    assert!(held >= 1, "A held items when it was killed");
    assert!(
        rescued >= u64::try_from(held).unwrap(),
        "the sweep handed A's items back"
    );
    assert_eq!((lapsed, a_late), (0, 0));
    assert_eq!(b_row.as_deref(), Some("offline"), "B said goodbye");
    assert_eq!(
        Counts::get(&b_counts.conflicts),
        0,
        "B never held a stale claim"
    );
}

/// An HTTP worker paused past its lease: the sweep hands its item back,
/// another HTTP worker completes it; the resumed worker's effect write,
/// renewal, failure and completion change nothing (409 each). Stale
/// writes accepted 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_worker_paused_past_its_lease_postgres() {
    let run = Run::pg().await;
    run.enqueue("effects.write", 1, 0, 5).await;
    let (auth, token) = http::worker_auth(&["default"]);
    let server = Server::start(run.queue.clone(), auth, "127.0.0.1:0".parse().unwrap()).await;
    let db = effects_db(&run).await;
    let stop = CancellationToken::new();
    let sweep = http::sweeper(run.queue.clone(), SWEEP, stop.clone());

    // A claims with the shortest lease, logs its start, and pauses.
    let mut a = Client::new(server.addr, &token);
    let (s, b) = a
        .post(
            "/v1/work/claim",
            &json!({"worker_id": "http-a", "lanes": ["default"], "lease_ms": 1000}),
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    let item = b["items"][0].clone();
    let id: uuid::Uuid = serde_json::from_value(item["id"].clone()).unwrap();
    let op_id = item["payload"]["op_id"].as_str().unwrap().to_owned();
    let op = Op {
        op_id: &op_id,
        item_id: id,
        token: item["fencing_token"].as_i64().unwrap(),
        attempt: 1,
    };
    db.log_start(op).await.unwrap();
    let paused = tokio::time::Instant::now();

    // B takes the item once the sweep handed it back, and completes it.
    let b_counts = Arc::new(Counts::default());
    let b_stop = CancellationToken::new();
    let bw = tokio::spawn(http::run_worker(
        server.addr,
        token.clone(),
        spec("http-b", &["default"], 1, 30_000, 1_000),
        db.clone(),
        b_counts.clone(),
        b_stop.clone(),
    ));
    assert!(
        run.wait_final(Duration::from_secs(60)).await,
        "B completes the item"
    );
    let resumed_at = chrono::Utc::now();
    let paused_for = paused.elapsed();

    // A resumes: every write of its stale claim is refused.
    let effect = db.write(op).await.unwrap();
    let handle = json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]});
    let mut answers = Vec::new();
    for (what, extra) in [
        ("renew", json!({"lease_ms": 30000})),
        ("fail", json!({"error": "late"})),
        ("defer", json!({"delay_ms": 0})),
        ("release", json!({})),
        ("complete", json!({})),
    ] {
        let mut body = handle.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (s, b) = a
            .post(&format!("/v1/work/items/{id}/{what}"), &body)
            .await
            .unwrap();
        answers.push((what, s.as_u16(), b["type"].clone()));
    }
    b_stop.cancel();
    bw.await.unwrap();
    stop.cancel();
    let _ = sweep.await;
    server.stop().await;

    let f = run.figures().await;
    let lapsed = checker::pg_lapsed_writes_accepted(run.pg_pool(), SCHEMA)
        .await
        .unwrap();
    let a_late = checker::pg_holder_writes_after(run.pg_pool(), SCHEMA, "http-a", resumed_at)
        .await
        .unwrap();
    let row = run.queue.get(uuid::Uuid::nil(), id).await.unwrap();
    let completer = scalar(
        &run,
        "SELECT count(*) FROM drover.transitions WHERE new_status = 'done' AND old_holder = 'http-b'",
    )
    .await;
    report(
        "HTTP 2 worker paused past its lease (PostgreSQL)",
        "1 item, A lease 1 s paused until B completed it",
        &format!(
            "{} | paused {:.2}s | A's late effect write changed {} | A's late writes {:?} | A queue writes after resume {a_late} | lapsed writes accepted {lapsed} | completed by B {completer}",
            f.row(),
            paused_for.as_secs_f64(),
            effect.changed,
            answers
                .iter()
                .map(|(w, s, _)| format!("{w} {s}"))
                .collect::<Vec<_>>()
        ),
    );
    f.assert_promises_kept();
    assert!(
        !effect.changed && !effect.claim_ok,
        "A's late effect write is refused"
    );
    for (what, s, kind) in &answers {
        assert_eq!(*s, 409, "A's late {what}");
        assert_eq!(kind, "urn:drover:problem:conflict");
    }
    assert_eq!((a_late, lapsed), (0, 0), "stale writes accepted");
    assert_eq!(row.status, drover::Status::Done);
    assert_eq!(row.claim_seq, 2, "B's claim (the second) completed it");
    assert_eq!(completer, 1);
}

/// The server restarted under load, twice (drain-first, as `drover serve`
/// stops on SIGTERM, then a new server on the same address): long polls
/// end with 503, workers reconnect and drain the rest. Lost 0, duplicate
/// completions 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_server_restarted_under_load_postgres() {
    const ITEMS: usize = 1_500;
    let run = Run::pg().await;
    run.enqueue("effects.write", ITEMS, 5, 10).await;
    let (auth, token) = http::worker_auth(&["default", "idle"]);
    let mut server = Server::start(
        run.queue.clone(),
        auth.clone(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await;
    let addr = server.addr;
    let db = effects_db(&run).await;
    let stop = CancellationToken::new();
    let sweep = http::sweeper(run.queue.clone(), SWEEP, stop.clone());
    let mut workers = Vec::new();
    let mut counts = Vec::new();
    // Three draining workers, and one long-polling an empty lane, so a
    // long poll is always in progress when the server stops.
    for (id, lane, cap, wait) in [
        ("http-1", "default", 20, 2_000),
        ("http-2", "default", 20, 2_000),
        ("http-3", "default", 20, 2_000),
        ("http-idle", "idle", 1, 30_000),
    ] {
        let c = Arc::new(Counts::default());
        counts.push(c.clone());
        workers.push(tokio::spawn(http::run_worker(
            addr,
            token.clone(),
            spec(id, &[lane], cap, 10_000, wait),
            db.clone(),
            c,
            stop.clone(),
        )));
    }
    let mut restarts = Vec::new();
    for third in 1..=2 {
        let at = i64::try_from(ITEMS * third / 3).unwrap();
        until("a third more done", Duration::from_secs(120), async || {
            run.count_status("done").await >= at
        })
        .await;
        let t = tokio::time::Instant::now();
        server.stop().await;
        let stopped = t.elapsed();
        server = Server::start(run.queue.clone(), auth.clone(), addr).await;
        restarts.push((stopped, t.elapsed()));
    }
    assert!(
        run.wait_final(Duration::from_secs(180)).await,
        "every item final"
    );
    stop.cancel();
    for w in workers {
        w.await.unwrap();
    }
    let _ = sweep.await;
    server.stop().await;

    let f = run.figures().await;
    let lapsed = checker::pg_lapsed_writes_accepted(run.pg_pool(), SCHEMA)
        .await
        .unwrap();
    let sum = |get: fn(&Counts) -> &std::sync::atomic::AtomicU64| -> u64 {
        counts.iter().map(|c| Counts::get(get(c))).sum()
    };
    let drained = sum(|c| &c.drained);
    let idle_drained = Counts::get(&counts[3].drained);
    let transport = sum(|c| &c.transport_errors);
    let conflicts = sum(|c| &c.conflicts);
    let completed = sum(|c| &c.completed);
    report(
        "HTTP 3 server restarted under load (PostgreSQL)",
        "1,500 items x 5 ms, 3 HTTP workers x capacity 20 (batch claims), 2 drain-first restarts",
        &format!(
            "{} | restarts (drain, down) {:?} | claims answered 503 {drained} (idle long poll {idle_drained}) | requests without answer, retried {transport} | completions 200 {completed}, 409 {conflicts} | lapsed writes accepted {lapsed}",
            f.row(),
            restarts
                .iter()
                .map(|(d, t)| format!(
                    "{:.0}/{:.0} ms",
                    d.as_secs_f64() * 1e3,
                    t.as_secs_f64() * 1e3
                ))
                .collect::<Vec<_>>()
        ),
    );
    f.assert_promises_kept();
    assert_eq!(f.done, i64::try_from(ITEMS).unwrap());
    assert_eq!(lapsed, 0);
    assert!(
        idle_drained >= 2,
        "the idle long poll ended with 503 at each stop"
    );
    // A completion whose answer was cut by a stop is sent again and meets
    // its own landed write as 409: together they cover every item.
    assert!(
        completed + conflicts >= u64::try_from(ITEMS).unwrap(),
        "every completion answered"
    );
}
