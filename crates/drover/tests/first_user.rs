//! The library API a first user trips on (issue 9, point 11): typed batch
//! enqueue, `enqueue_in` with the enqueue builder, operators as principals,
//! `traceparent` checked at enqueue, the pool size through the library, an
//! order-independent worker builder with a metrics switch, and what
//! dropping a running worker does.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{JobContext, Kind, OPERATE_PERMISSION, Principal, Queue};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{ConnectOptions, Store};
use drover::testing::{pg_drop_schema, pg_url};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker, WorkerSettings};
use drover::{ErrorKind, InsertResult, NewItem, Status};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Serialize, Deserialize)]
struct SendWelcome {
    user_id: u64,
}

impl Kind for SendWelcome {
    const NAME: &'static str = "send_welcome";
    const LANE: &'static str = "mail";
    const MAX_ATTEMPTS: i32 = 3;
    const PERMISSION: &'static str = "mail.send";
}

#[derive(Debug, Serialize, Deserialize)]
struct BuildReport {
    id: u64,
}

impl Kind for BuildReport {
    const NAME: &'static str = "report.build";
    const LANE: &'static str = "slow";
    const MAX_ATTEMPTS: i32 = 9;
    const PERMISSION: &'static str = "reports.build";
}

const STRATEGY: Strategy = Strategy {
    idempotency: "test handler: no side effects",
    retry: "queue default",
    checkpoint: "none: one step, a rerun starts over",
    recovery: "swept after the lease",
};

async fn all_items(q: &Queue) -> Vec<drover::Item> {
    q.list(&drover::store::ListFilter {
        limit: 10_000,
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn typed_batch_takes_each_kinds_lane_budget_and_permission() {
    let q = Queue::memory();
    let tenant = Uuid::now_v7();
    let p = Principal::new(Uuid::now_v7(), tenant, ["mail.send", "reports.build"]);
    let out = q
        .enqueue_batch()
        .principal(p)
        .extend((0..3).map(|user_id| SendWelcome { user_id }))
        .job_with(BuildReport { id: 7 }, |i| i.with_key("report:7"))
        .await
        .unwrap();
    assert_eq!(out, vec![InsertResult::Inserted; 4]);
    let items = all_items(&q).await;
    assert_eq!(items.len(), 4);
    for it in &items {
        match it.kind.as_str() {
            "send_welcome" => assert_eq!((it.lane.as_str(), it.max_attempts), ("mail", 3)),
            "report.build" => {
                assert_eq!((it.lane.as_str(), it.max_attempts), ("slow", 9));
                assert_eq!(it.idempotency_key.as_deref(), Some("report:7"));
            }
            k => panic!("unexpected kind {k}"),
        }
        assert_eq!(it.tenant_id, tenant);
    }
}

#[tokio::test]
async fn typed_batch_with_one_kind_the_principal_may_not_enqueue_writes_nothing() {
    let q = Queue::memory();
    let p = Principal::new(Uuid::now_v7(), Uuid::now_v7(), ["mail.send"]);
    let mut batch = q.enqueue_batch().principal(p);
    for user_id in 0..5 {
        batch.push(SendWelcome { user_id });
    }
    batch.push(BuildReport { id: 1 });
    let e = batch.await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");
    assert!(e.to_string().contains("reports.build"), "{e}");
    assert!(all_items(&q).await.is_empty());
}

#[tokio::test]
async fn enqueue_in_takes_the_same_builder_as_enqueue() {
    let path = std::env::temp_dir().join(format!("drover-first-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = Arc::new(
        SqliteStore::open(&url, SqliteOptions::default())
            .await
            .unwrap(),
    );
    store.migrate().await.unwrap();
    let queue = Queue::new(store.clone());
    let tenant = Uuid::now_v7();
    let actor = Uuid::now_v7();

    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let first = queue
        .enqueue_in(&mut *tx, SendWelcome { user_id: 1 })
        .key("welcome:1")
        .lane("vip")
        .delay(Duration::from_secs(3600))
        .priority(-2)
        .principal(Principal::new(actor, tenant, ["mail.send"]).with_request("req-1"))
        .await
        .unwrap();
    let again = queue
        .enqueue_in(&mut *tx, SendWelcome { user_id: 1 })
        .key("welcome:1")
        .principal(Principal::new(actor, tenant, ["mail.send"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(first.result, InsertResult::Inserted);
    assert_eq!(again.result, InsertResult::KeyExists);
    let item = queue.get(tenant, first.item.id).await.unwrap();
    assert_eq!(item.lane, "vip");
    assert_eq!(item.priority, -2);
    assert_eq!(item.created_by, actor);
    assert_eq!(item.request_id.as_deref(), Some("req-1"));
    assert!(item.available_at > chrono::Utc::now() + chrono::Duration::minutes(50));

    // The permission check holds on the caller's transaction too.
    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let e = queue
        .enqueue_in(&mut *tx, SendWelcome { user_id: 2 })
        .principal(Principal::new(actor, tenant, ["other"]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    tx.rollback().await.unwrap();
    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn operator_calls_take_a_principal_checked_like_enqueue() {
    let q = Queue::memory();
    let tenant = Uuid::now_v7();
    let out = q
        .enqueue_item(
            &Principal::system(),
            NewItem::new("x", serde_json::json!({})).with_tenant(tenant),
        )
        .await
        .unwrap();
    let id = out.item.id;

    let no_permission = Principal::new(Uuid::now_v7(), tenant, ["drover.enqueue"]);
    let e = q.cancel(&no_permission, tenant, id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");
    assert!(e.to_string().contains(OPERATE_PERMISSION), "{e}");

    let other_tenant = Principal::new(Uuid::now_v7(), Uuid::now_v7(), [OPERATE_PERMISSION]);
    let e = q.cancel(&other_tenant, tenant, id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");
    let e = q.retry(&other_tenant, tenant, id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden, "{e}");

    let operator = Uuid::now_v7();
    let op = Principal::new(operator, tenant, [OPERATE_PERMISSION]);
    assert_eq!(
        q.cancel(&op, tenant, id).await.unwrap().status,
        Status::Cancelled
    );
    assert_eq!(
        q.retry(&op, tenant, id).await.unwrap().status,
        Status::Pending
    );
    let audit = q.audit(tenant, id).await.unwrap();
    assert!(audit.iter().all(|a| a.actor == operator), "{audit:?}");
    assert_eq!(audit.len(), 2);
}

#[tokio::test]
async fn a_malformed_traceparent_is_refused_at_enqueue_naming_the_field() {
    let q = Queue::memory();
    for bad in [
        "not-a-trace",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
    ] {
        let mut item = NewItem::new("x", serde_json::json!({}));
        item.traceparent = Some(bad.into());
        match q.enqueue_item(&Principal::system(), item).await {
            Err(drover::Error::InvalidInput { field, .. }) => assert_eq!(field, "traceparent"),
            other => panic!("{bad:?} accepted: {other:?}"),
        }
        let e = q
            .enqueue(SendWelcome { user_id: 1 })
            .principal(Principal::system().with_traceparent(bad))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                drover::Error::InvalidInput {
                    field: "traceparent",
                    ..
                }
            ),
            "{e}"
        );
    }
    assert!(all_items(&q).await.is_empty());
    q.enqueue(SendWelcome { user_id: 1 })
        .principal(
            Principal::system()
                .with_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        )
        .await
        .expect("a valid traceparent is kept");
}

#[tokio::test]
// `..Default` keeps this compiling as ConnectOptions grows fields.
#[allow(clippy::needless_update)]
async fn connect_with_opens_the_pool_at_the_size_asked() {
    let url = pg_url().await;
    let schema = format!("drover_t_{}", Uuid::new_v4().simple());
    let q = Queue::connect_with(
        &url,
        &ConnectOptions {
            pool_size: 3,
            schema: schema.clone(),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(q.store().pool_size(), Some(3));
    pg_drop_schema(&url, &schema).await;
}

/// Set in the child process [`queue_connect_honours_drover_pool_size`]
/// starts (tests cannot set variables in their own process safely).
const CHILD_URL: &str = "DROVER_TEST_CHILD_URL";

#[tokio::test]
async fn queue_connect_honours_drover_pool_size() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        let q = Queue::connect(&url).await.unwrap();
        assert_eq!(q.store().pool_size(), Some(3));
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "queue_connect_honours_drover_pool_size",
            "--nocapture",
        ])
        .env(CHILD_URL, pg_url().await)
        .env("DROVER_POOL_SIZE", "3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hold;

impl Kind for Hold {
    const NAME: &'static str = "test.hold";
}

/// Runs until cancelled (or dropped).
struct Holder;

/// Never returns, not even when its token fires: only a drop ends it.
struct Stuck;

impl Handler for Stuck {
    type Job = Hold;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Hold) -> Outcome {
        std::future::pending().await
    }
}

impl Handler for Holder {
    type Job = Hold;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, _job: Hold) -> Outcome {
        cx.cancellation().cancelled().await;
        Ok(Done::Completed)
    }
}

#[test]
fn builder_order_does_not_matter() {
    let from_env = WorkerSettings {
        capacity: 7,
        ..WorkerSettings::default()
    };
    // settings, then lane: the lane replaces the default one.
    let w = Worker::builder(Queue::memory())
        .settings(from_env.clone())
        .lane("x")
        .handler(Holder)
        .build()
        .unwrap();
    assert_eq!(w.settings().lanes, ["x"]);
    assert_eq!(w.settings().capacity, 7);
    // explicit calls, then settings: the later settings keep them.
    let w = Worker::builder(Queue::memory())
        .lane("x")
        .lane("y")
        .capacity(3)
        .metrics_addr(None)
        .settings(from_env)
        .handler(Holder)
        .build()
        .unwrap();
    assert_eq!(w.settings().lanes, ["x", "y"]);
    assert_eq!(w.settings().capacity, 3);
    assert_eq!(w.settings().metrics_addr, None);
}

#[tokio::test]
async fn a_taken_metrics_port_names_the_setting_and_the_switch_turns_it_off() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = Worker::builder(Queue::memory())
        .metrics_addr(addr)
        .handler(Holder)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("DROVER_METRICS_ADDR"), "{msg}");
    assert!(msg.contains("metrics_addr"), "{msg}");
    let running = Worker::builder(Queue::memory())
        .metrics_addr(None)
        .handler(Holder)
        .build()
        .unwrap()
        .start()
        .await
        .expect("no listener, nothing to bind");
    assert_eq!(running.metrics_addr(), None);
    running.shutdown().await;
}

#[tokio::test]
async fn dropping_a_running_worker_stops_it_and_releases_its_in_flight_item() {
    let q = Queue::memory();
    let out = q.enqueue(Hold).await.unwrap();
    let id = out.item.id;
    let running = Worker::builder(q.clone())
        .settings(WorkerSettings {
            poll_interval: Duration::from_millis(20),
            // Long enough that only the drop, never a lapse, can hand it back.
            lease: Duration::from_secs(300),
            renew_interval: Duration::from_secs(60),
            ..WorkerSettings::default()
        })
        .metrics_addr(None)
        .without_sweep()
        .handler(Stuck)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while q.get(Uuid::nil(), id).await.unwrap().status != Status::Claimed {
        assert!(tokio::time::Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(running);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let item = q.get(Uuid::nil(), id).await.unwrap();
        if item.status == Status::Pending {
            assert_eq!(item.attempts, 0, "a release spends no attempt");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dropped worker kept the item: {item:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
