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
            // Its name in the merged test binary (tests/integration): module, then function.
            "first_user::queue_connect_honours_drover_pool_size",
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
    // settings, then lane: the lane replaces the default one (the
    // heartbeat's lane, `default`, is said to be drained by another worker).
    let w = Worker::builder(Queue::memory())
        .settings(from_env.clone())
        .lane("x")
        .drained_elsewhere("default")
        .handler(Holder)
        .build()
        .unwrap();
    assert_eq!(w.settings().lanes, ["x"]);
    assert_eq!(w.settings().capacity, 7);
    // explicit calls, then settings: the later settings keep them.
    let w = Worker::builder(Queue::memory())
        .lane("x")
        .lane("y")
        .drained_elsewhere("default")
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

/// A kind that names a lane of its own, handled on a worker of lane `x`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Routed;

impl Kind for Routed {
    const NAME: &'static str = "test.routed";
    const LANE: &'static str = "reports";
}

struct RoutedHandler;

impl Handler for RoutedHandler {
    type Job = Routed;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Routed) -> Outcome {
        Ok(Done::Completed)
    }
}

/// Issue 31, point 5: a worker never silently strands work it creates
/// itself. `.lane("mail")` replaces the default lane; the heartbeat, a
/// workflow's step items, a schedule of a kind it handles and a kind that
/// names its own lane all write elsewhere, and `build` says so, naming the
/// lane, the writer and the two calls that fix it.
#[test]
fn a_worker_refuses_to_strand_work_it_creates_itself() {
    use drover::orchestration::{Next, Workflow, WorkflowStrategy, Workflows};
    use drover::periodic::Schedule;

    let no_beat = || WorkerSettings {
        heartbeat_cron: None,
        ..WorkerSettings::default()
    };
    let refused = |b: drover::worker::WorkerBuilder| {
        let e = b.build().expect_err("stranded work refused");
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        e.to_string()
    };

    // The heartbeat (on by default, lane `default`).
    let msg = refused(
        Worker::builder(Queue::memory())
            .lane("mail")
            .handler(Holder),
    );
    assert!(msg.contains("lane \"default\""), "{msg}");
    assert!(msg.contains("heartbeat"), "{msg}");
    assert!(msg.contains(".lane(\"default\")"), "{msg}");
    assert!(msg.contains(".drained_elsewhere(\"default\")"), "{msg}");
    assert!(msg.contains("DROVER_DRAINED_ELSEWHERE"), "{msg}");

    // A workflow's step items.
    let flow = Workflow::<u32>::new(
        "checkout",
        WorkflowStrategy {
            compensation: "none",
            resume: "sweep",
        },
    )
    .step("pay", |_cx, s| async move { Ok(Next::step("pay", s)) });
    let msg = refused(
        Worker::builder(Queue::memory())
            .settings(no_beat())
            .lane("mail")
            .workflows(Workflows::new().with(flow)),
    );
    assert!(msg.contains("workflow checkout's step items"), "{msg}");

    // A schedule of a kind this worker handles.
    let msg = refused(
        Worker::builder(Queue::memory())
            .settings(no_beat())
            .lane("mail")
            .handler(Holder)
            .schedule(Schedule::new("hold", "0 * * * *", Hold).lane("nightly")),
    );
    assert!(msg.contains("lane \"nightly\""), "{msg}");
    assert!(msg.contains("schedule hold"), "{msg}");

    // A kind that routes its items to a lane of its own (enqueue, relay).
    let msg = refused(
        Worker::builder(Queue::memory())
            .settings(no_beat())
            .lane("mail")
            .handler(RoutedHandler),
    );
    assert!(msg.contains("lane \"reports\""), "{msg}");
    assert!(msg.contains("kind test.routed"), "{msg}");

    // Each fix builds: drain it here, or say another worker drains it
    // (by the call, or by the setting the CLI and DROVER_* fill).
    Worker::builder(Queue::memory())
        .lane("mail")
        .lane("default")
        .handler(Holder)
        .build()
        .expect("drained here");
    Worker::builder(Queue::memory())
        .lane("mail")
        .drained_elsewhere("default")
        .handler(Holder)
        .build()
        .expect("drained elsewhere");
    Worker::builder(Queue::memory())
        .settings(WorkerSettings {
            lanes: vec!["mail".into()],
            drained_elsewhere: vec!["default".into(), "reports".into()],
            ..WorkerSettings::default()
        })
        .handler(Holder)
        .handler(RoutedHandler)
        .build()
        .expect("drained elsewhere, from the settings");
    // A schedule of a kind it does not handle feeds other workers.
    Worker::builder(Queue::memory())
        .settings(no_beat())
        .lane("mail")
        .handler(RoutedHandler)
        .drained_elsewhere("reports")
        .schedule(Schedule::new("hold", "0 * * * *", Hold).lane("nightly"))
        .build()
        .expect("another worker's schedule");
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

/// Issue 31, point 7: a library worker serves no listener unless asked,
/// so two workers built with the defaults start side by side in one
/// process (before, the second failed on 127.0.0.1:9464); asked for port
/// 0, each binds a port of its own and reports it.
#[tokio::test]
async fn two_workers_built_with_defaults_start_in_one_process() {
    let q = Queue::memory();
    let start = |addr: Option<std::net::SocketAddr>| {
        let b = Worker::builder(q.clone()).handler(Holder);
        let b = match addr {
            Some(a) => b.metrics_addr(a),
            None => b,
        };
        async move { b.build().unwrap().start().await }
    };
    let a = start(None).await.expect("first worker");
    let b = start(None)
        .await
        .expect("second worker: no port to race for");
    assert_eq!((a.metrics_addr(), b.metrics_addr()), (None, None));
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let c = start(Some(any)).await.expect("port 0, opted in");
    let d = start(Some(any)).await.expect("port 0 again");
    let (c_addr, d_addr) = (c.metrics_addr().unwrap(), d.metrics_addr().unwrap());
    assert_ne!(c_addr.port(), 0);
    assert_ne!(c_addr, d_addr);
    for w in [a, b, c, d] {
        w.shutdown().await;
    }
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

/// A kind whose handler logs one line.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Said;

impl Kind for Said {
    const NAME: &'static str = "test.said";
}

struct Sayer;

impl Handler for Sayer {
    type Job = Said;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Said) -> Outcome {
        tracing::info!("hello from the handler");
        Ok(Done::Completed)
    }
}

/// A `tracing_subscriber::fmt` writer into memory.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Issue 31, point 11: a line a handler logs under the default `fmt`
/// formatter carries a short span prefix, `drover.item{kind=.. id=..}`,
/// not the run's ~350 characters of exporter attributes (those are set on
/// the exported span with feature `otel`: `otel_links.rs`).
#[test]
fn a_handlers_log_line_carries_a_short_span_prefix() {
    let out = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .with_ansi(false)
        .finish();
    // One thread, so every task the worker spawns logs to this subscriber.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let id = tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let q = Queue::memory();
            let id = q.enqueue(Said).await.unwrap().item.id;
            let w = Worker::builder(q.clone())
                .settings(WorkerSettings {
                    poll_interval: Duration::from_millis(20),
                    heartbeat_cron: None,
                    ..WorkerSettings::default()
                })
                .without_sweep()
                .handler(Sayer)
                .build()
                .unwrap()
                .start()
                .await
                .unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while q.get(Uuid::nil(), id).await.unwrap().status != Status::Done {
                assert!(tokio::time::Instant::now() < deadline, "never done");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            w.shutdown().await;
            id
        })
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("hello from the handler"))
        .unwrap_or_else(|| panic!("the handler's line: {text}"));
    let span = line
        .find("drover.item{")
        .and_then(|at| line[at..].find("}:").map(|end| &line[at..at + end + 2]))
        .unwrap_or_else(|| panic!("the run's span prefix: {line}"));
    assert!(
        span.starts_with(&format!("drover.item{{kind=test.said id={id}")),
        "{span}"
    );
    for exporter_only in ["messaging.", "tenant", "fencing", "attempt"] {
        assert!(!span.contains(exporter_only), "{exporter_only} in {span}");
    }
    // kind and id, and with feature `otel` the exported span's name and
    // kind: under 120 characters, where every attribute took about 350.
    assert!(span.len() < 120, "{} characters: {span}", span.len());
}
