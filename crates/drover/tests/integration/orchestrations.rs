//! Orchestrations run by a real worker on every backend (memory, SQLite,
//! PostgreSQL): steps in order, retries, compensation in reverse, parks
//! resumed by the sweep, signals (wake-up, kept before the park, timeout),
//! unknown steps parked as stuck and resumed after a fix, cancellation.
//!
//! Synchronised on rows (the record's status) and on effects the steps
//! record; the only time bounds are correctness bounds with margins.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::orchestration::{
    Next, Orchestration, OrchestrationStatus, SignalOutcome, Start, StepContext, StepError,
    Workflow, WorkflowStrategy, Workflows,
};
use drover::queue::{Principal, Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::Store;
use drover::worker::{RunningWorker, WorkerSettings};
use drover::{ErrorKind, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

const STRATEGY: WorkflowStrategy = WorkflowStrategy {
    compensation: "each completed step's compensation, newest first",
    resume: "parked records resumed by the sweep or a signal",
};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct St {
    n: u32,
}

/// What the steps do, and what they did.
#[derive(Default)]
struct Plan {
    /// Step that fails for good.
    fail: Option<&'static str>,
    /// Compensation that fails for good.
    fail_comp: Option<&'static str>,
    /// Step that fails (retryably) on its first N attempts.
    flaky: Option<(&'static str, i32)>,
    /// Effects, in order: `s3`, `undo:s2`, … with the signal payload if any.
    log: Mutex<Vec<String>>,
    /// Effects keyed on (orchestration, step, version): applied once each.
    applied: Mutex<HashMap<(Uuid, String, i64), u32>>,
    /// When each step last started.
    started: Mutex<HashMap<String, Instant>>,
}

impl Plan {
    fn effect(&self, cx: &StepContext, what: String) {
        let mut a = self.applied.lock().unwrap();
        *a.entry((cx.orchestration_id(), what.clone(), cx.version()))
            .or_default() += 1;
        self.log.lock().unwrap().push(what);
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

async fn step(
    plan: Arc<Plan>,
    cx: StepContext,
    s: St,
    name: &'static str,
    next: Option<&'static str>,
) -> Result<Next<St>, StepError> {
    plan.started
        .lock()
        .unwrap()
        .insert(name.to_owned(), Instant::now());
    if plan.fail == Some(name) {
        return Err(StepError::Fatal(format!("{name} refused")));
    }
    if let Some((f, n)) = plan.flaky
        && f == name
        && cx.attempt() <= n
    {
        return Err(StepError::Retry(format!("{name} flaked")));
    }
    let what = match cx.signal() {
        Some(sig) => format!("{name}+{sig}"),
        None => name.to_owned(),
    };
    plan.effect(&cx, what);
    let st = St { n: s.n + 1 };
    Ok(match next {
        Some(n) => Next::step(n, st),
        None => Next::complete(json!({"steps": st.n}), st),
    })
}

async fn undo(plan: Arc<Plan>, cx: StepContext, name: &'static str) -> Result<(), StepError> {
    if plan.fail_comp == Some(name) {
        return Err(StepError::Fatal(format!("undo {name} refused")));
    }
    plan.effect(&cx, format!("undo:{name}"));
    Ok(())
}

/// `five`: s1 → s2 → s3 → s4 → s5 → complete, each with a compensation.
fn five(plan: &Arc<Plan>) -> Workflow<St> {
    let mut w = Workflow::<St>::new("five", STRATEGY).max_attempts(3);
    let names = ["s1", "s2", "s3", "s4", "s5"];
    for (i, name) in names.iter().copied().enumerate() {
        let next = names.get(i + 1).copied();
        let p = plan.clone();
        w = w.step(name, move |cx, s| step(p.clone(), cx, s, name, next));
        let p = plan.clone();
        w = w.compensate(name, move |cx, _s| undo(p.clone(), cx, name));
    }
    w
}

/// `waits`: s1 parks for `payment_confirmed` (60 s, or `timeout_ms`), then
/// `paid` completes; a timeout runs `expired`.
fn waits(
    plan: &Arc<Plan>,
    timeout: Duration,
    gate: Option<Arc<tokio::sync::Semaphore>>,
) -> Workflow<St> {
    let p = plan.clone();
    let w = Workflow::<St>::new("waits", STRATEGY).step("s1", move |cx, s| {
        let (p, gate) = (p.clone(), gate.clone());
        async move {
            if let Some(g) = gate {
                // Held here until the test has sent its early signal.
                let _permit = g.acquire().await.map_err(StepError::fatal)?;
            }
            p.effect(&cx, "s1".into());
            Ok(Next::WaitSignal {
                name: "payment_confirmed",
                step: "paid",
                timeout,
                on_timeout: "expired",
                state: s,
            })
        }
    });
    let p = plan.clone();
    let w = w.step("paid", move |cx, s| step(p.clone(), cx, s, "paid", None));
    let p = plan.clone();
    let w = w.step("expired", move |cx, s| {
        step(p.clone(), cx, s, "expired", None)
    });
    let p = plan.clone();
    w.compensate("s1", move |cx, _s| undo(p.clone(), cx, "s1"))
}

/// `parks`: s1 parks until `at` (in the state), then s2 completes.
fn parks(plan: &Arc<Plan>, park: Duration) -> Workflow<St> {
    let p = plan.clone();
    let w = Workflow::<St>::new("parks", STRATEGY).step("s1", move |cx, s| {
        let p = p.clone();
        async move {
            p.started
                .lock()
                .unwrap()
                .insert("s1".to_owned(), Instant::now());
            p.effect(&cx, "s1".into());
            Ok(Next::ParkUntil {
                at: chrono::Utc::now() + chrono::Duration::from_std(park).unwrap(),
                step: "s2",
                state: s,
            })
        }
    });
    let p = plan.clone();
    w.step("s2", move |cx, s| step(p.clone(), cx, s, "s2", None))
}

const SWEEP: Duration = Duration::from_millis(250);

fn settings(poll: Duration) -> WorkerSettings {
    WorkerSettings {
        capacity: 4,
        lease: Duration::from_secs(6),
        renew_interval: Duration::from_secs(2),
        renew_timeout: Duration::from_millis(400),
        poll_interval: poll,
        sweep_interval: SWEEP,
        shutdown_grace: Duration::from_secs(5),
        metrics_addr: None,
        ..WorkerSettings::default()
    }
}

fn queue(store: Arc<dyn Store>) -> Queue {
    Queue::new(store).with_config(QueueConfig {
        retry: RetryPolicy {
            base: Duration::from_millis(20),
            cap: Duration::from_millis(100),
            ..RetryPolicy::default()
        },
        ..QueueConfig::default()
    })
}

async fn worker(q: &Queue, w: Workflows, poll: Duration) -> RunningWorker {
    Worker::builder(q.clone())
        .settings(settings(poll))
        .workflows(w)
        .build()
        .expect("build")
        .start()
        .await
        .expect("start")
}

async fn wait_status(
    q: &Queue,
    id: Uuid,
    want: &[OrchestrationStatus],
    limit: Duration,
) -> Orchestration {
    let end = Instant::now() + limit;
    loop {
        let r = q.orchestration(Uuid::nil(), id).await.expect("read");
        if want.contains(&r.status) {
            return r;
        }
        assert!(
            Instant::now() < end,
            "orchestration {id} never reached {want:?}: {} at step {} ({:?}), history {:#?}",
            r.status,
            r.step,
            r.error,
            r.history
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Signals `id` in the nil tenant as the system principal.
async fn send(
    q: &Queue,
    id: Uuid,
    payload: serde_json::Value,
    key: Option<&str>,
) -> drover::Result<SignalOutcome> {
    q.signal(
        &Principal::system(),
        Uuid::nil(),
        id,
        "payment_confirmed",
        payload,
        key,
    )
    .await
}

async fn start(q: &Queue, w: &Workflow<St>) -> Uuid {
    q.start(&Start::of(w, &St::default()).unwrap())
        .await
        .expect("start")
        .record
        .id
}

/// Runs `case` against a fresh store of each backend.
macro_rules! on_every_backend {
    ($name:ident, $case:ident) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory() {
                $case(Arc::new(drover::store::memory::MemoryStore::new())).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let dir = std::env::temp_dir().join(format!("drover-orch-{}.db", Uuid::now_v7()));
                let store = drover::store::sqlite::SqliteStore::open(
                    dir.to_str().unwrap(),
                    drover::store::sqlite::SqliteOptions::default(),
                )
                .await
                .unwrap();
                store.migrate().await.unwrap();
                $case(Arc::new(store)).await;
                let _ = std::fs::remove_file(&dir);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let (store, schema) = drover::testing::pg_fresh_store().await;
                $case(store).await;
                drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
            }
        }
    };
}

async fn completes_in_order_each_step_once(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan {
        flaky: Some(("s2", 2)),
        ..Plan::default()
    });
    let w = worker(
        &q,
        Workflows::new().with(five(&plan)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &five(&plan)).await;
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    // s2 failed twice (retryable) and still ran its effect once.
    assert_eq!(plan.log(), vec!["s1", "s2", "s3", "s4", "s5"]);
    assert!(plan.applied.lock().unwrap().values().all(|n| *n == 1));
    assert_eq!(r.result, Some(json!({"steps": 5})));
    assert_eq!(r.completed, vec!["s1", "s2", "s3", "s4", "s5"]);
    let s2: Vec<_> = r.history.iter().filter(|h| h.step == "s2").collect();
    assert_eq!(s2.len(), 1, "one transition for s2: {s2:?}");
    assert_eq!(s2[0].attempt, 3, "the third attempt landed");
}
on_every_backend!(completes_in_order, completes_in_order_each_step_once);

async fn permanent_failure_compensates_in_reverse(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan {
        fail: Some("s4"),
        ..Plan::default()
    });
    let w = worker(
        &q,
        Workflows::new().with(five(&plan)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &five(&plan)).await;
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::Compensated],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(
        plan.log(),
        vec!["s1", "s2", "s3", "undo:s3", "undo:s2", "undo:s1"]
    );
    assert!(plan.applied.lock().unwrap().values().all(|n| *n == 1));
    assert!(r.error.as_deref().unwrap().contains("s4"), "{:?}", r.error);
    assert!(r.completed.is_empty());
}
on_every_backend!(
    compensates_in_reverse,
    permanent_failure_compensates_in_reverse
);

async fn failing_compensation_ends_compensation_failed(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan {
        fail: Some("s4"),
        fail_comp: Some("s2"),
        ..Plan::default()
    });
    let w = worker(
        &q,
        Workflows::new().with(five(&plan)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &five(&plan)).await;
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::CompensationFailed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "s2", "s3", "undo:s3"]);
    assert!(r.error.as_deref().unwrap().contains("compensation of s2"));
    // Listed, never dropped.
    let listed = q
        .orchestrations(&drover::orchestration::OrchestrationFilter {
            status: Some(OrchestrationStatus::CompensationFailed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![id]);
}
on_every_backend!(
    compensation_failed,
    failing_compensation_ends_compensation_failed
);

async fn park_until_resumes_within_a_sweep_interval(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let park = Duration::from_millis(400);
    let w = worker(
        &q,
        Workflows::new().with(parks(&plan, park)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &parks(&plan, park)).await;
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    let (s1, s2) = {
        let started = plan.started.lock().unwrap();
        (started["s1"], started["s2"])
    };
    // T is set by s1 itself, so the time the worker took to first claim the
    // orchestration (long on a loaded PostgreSQL) is not counted as lateness.
    let late = s2.duration_since(s1).saturating_sub(park);
    eprintln!("park until T: s2 started {late:?} after T");
    // One sweep interval (jittered up to +20 %) plus the claim that follows
    // the sweep's enqueue. Nothing else resumes a parked orchestration, so a
    // missed sweep would mean never; the 2 s margin only absorbs a machine
    // loaded by the rest of the suite (CI saw 0.93 s measured from enqueue).
    assert!(
        late <= SWEEP.mul_f64(1.2) + Duration::from_secs(2),
        "resumed {late:?} after T"
    );
    assert_eq!(plan.log(), vec!["s1", "s2"]);
}
on_every_backend!(park_until, park_until_resumes_within_a_sweep_interval);

async fn signal_wakes_a_parked_orchestration_at_once(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    // A poll of 10 s: only the signal's wake-up can start the step soon.
    let w = worker(
        &q,
        Workflows::new().with(waits(&plan, Duration::from_secs(60), None)),
        Duration::from_secs(10),
    )
    .await;
    let id = start(&q, &waits(&plan, Duration::from_secs(60), None)).await;
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Parked],
        Duration::from_secs(30),
    )
    .await;
    let sent = Instant::now();
    let out = send(&q, id, json!({"psp": "ok"}), Some("psp-1"))
        .await
        .unwrap();
    assert_eq!(out, SignalOutcome::Woke);
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(5),
    )
    .await;
    let latency = plan.started.lock().unwrap()["paid"].duration_since(sent);
    w.shutdown().await;
    eprintln!("signal to step start: {latency:?}");
    assert!(
        latency < Duration::from_secs(2),
        "woken by the poll, not the signal: {latency:?}"
    );
    assert_eq!(
        plan.log(),
        vec!["s1".to_owned(), r#"paid+{"psp":"ok"}"#.to_owned()]
    );
    // A signal resent with its key after the end is the same delivery (a
    // resent webhook must not fail); any new signal after the end is refused.
    let again = send(&q, id, json!({}), Some("psp-1")).await;
    assert_eq!(again.unwrap(), SignalOutcome::Duplicate);
    let late = send(&q, id, json!({}), Some("psp-2")).await;
    assert_eq!(late.unwrap_err().kind(), ErrorKind::Conflict);
}
on_every_backend!(signal_wakes, signal_wakes_a_parked_orchestration_at_once);

async fn signal_before_the_park_is_consumed(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let w = worker(
        &q,
        Workflows::new().with(waits(&plan, Duration::from_secs(60), Some(gate.clone()))),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &waits(&plan, Duration::from_secs(60), None)).await;
    // Until the gate opens s1 cannot park: the record is running, so the
    // signal is kept for the park.
    let out = send(&q, id, json!(1), None).await.unwrap();
    assert_eq!(out, SignalOutcome::Kept);
    gate.add_permits(1);
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "paid+1"]);
    assert!(
        r.history
            .iter()
            .any(|h| h.outcome == "signal payment_confirmed received"),
        "{:#?}",
        r.history
    );
}
on_every_backend!(signal_before_park, signal_before_the_park_is_consumed);

async fn signal_wait_times_out_into_its_timeout_step(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let timeout = Duration::from_millis(300);
    let w = worker(
        &q,
        Workflows::new().with(waits(&plan, timeout, None)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &waits(&plan, timeout, None)).await;
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "expired"]);
}
on_every_backend!(signal_timeout, signal_wait_times_out_into_its_timeout_step);

async fn unknown_step_is_stuck_then_resumed_after_the_fix(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    // The deployed code: s1 hands over to a step this version lacks.
    let p = plan.clone();
    let old = Workflow::<St>::new("deploy", STRATEGY).step("s1", move |cx, s| {
        let p = p.clone();
        async move {
            p.effect(&cx, "s1".into());
            Ok(Next::step("s2", s))
        }
    });
    let w = worker(&q, Workflows::new().with(old), Duration::from_millis(50)).await;
    let p = plan.clone();
    let starter = Workflow::<St>::new("deploy", STRATEGY).step("s1", move |cx, s| {
        let p = p.clone();
        async move {
            p.effect(&cx, "s1".into());
            Ok(Next::step("s2", s))
        }
    });
    let id = start(&q, &starter).await;
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::Stuck],
        Duration::from_secs(30),
    )
    .await;
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("\"s2\" is not declared"),
        "{:?}",
        r.error
    );
    assert_eq!(r.step, "s2");
    w.shutdown().await;
    // The fixed code declares s2; an operator resumes.
    let p = plan.clone();
    let fixed = Workflow::<St>::new("deploy", STRATEGY)
        .step("s1", |_cx, s| async move { Ok(Next::step("s2", s)) })
        .step("s2", move |cx, s| step(p.clone(), cx, s, "s2", None));
    let w = worker(&q, Workflows::new().with(fixed), Duration::from_millis(50)).await;
    q.resume_orchestration(&Principal::system(), Uuid::nil(), id)
        .await
        .unwrap();
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "s2"]);
}
on_every_backend!(
    unknown_step,
    unknown_step_is_stuck_then_resumed_after_the_fix
);

async fn cancel_runs_the_compensations(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let w = worker(
        &q,
        Workflows::new().with(waits(&plan, Duration::from_secs(60), None)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &waits(&plan, Duration::from_secs(60), None)).await;
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Parked],
        Duration::from_secs(30),
    )
    .await;
    q.cancel_orchestration(&Principal::system(), Uuid::nil(), id)
        .await
        .unwrap();
    wait_status(
        &q,
        id,
        &[OrchestrationStatus::Cancelled],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "undo:s1"]);
    assert_eq!(
        q.cancel_orchestration(&Principal::system(), Uuid::nil(), id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
}
on_every_backend!(cancel, cancel_runs_the_compensations);

/// A step that panics on every attempt fails the orchestration into
/// compensation once its attempts are spent (not a silent dead letter).
async fn panicking_step_fails_into_compensation(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let make = |plan: &Arc<Plan>| {
        let p = plan.clone();
        let p2 = plan.clone();
        Workflow::<St>::new("panics", STRATEGY)
            .max_attempts(2)
            .step("s1", move |cx, s| step(p.clone(), cx, s, "s1", Some("s2")))
            .step("s2", |_cx, _s: St| async move {
                if true {
                    panic!("s2 always panics");
                }
                Ok(Next::step("s2", St::default()))
            })
            .compensate("s1", move |cx, _s| undo(p2.clone(), cx, "s1"))
    };
    let w = worker(
        &q,
        Workflows::new().with(make(&plan)),
        Duration::from_millis(50),
    )
    .await;
    let id = start(&q, &make(&plan)).await;
    let r = wait_status(
        &q,
        id,
        &[OrchestrationStatus::Compensated],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "undo:s1"]);
    assert!(
        r.error.as_deref().unwrap().contains("panicked"),
        "{:?}",
        r.error
    );
}
on_every_backend!(panicking_step, panicking_step_fails_into_compensation);

/// Started in the caller's transaction: exists if and only if it commits;
/// a retried start with the key meets its own orchestration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_in_the_callers_transaction_sqlite() {
    let path = std::env::temp_dir().join(format!("drover-orch-tx-{}.db", Uuid::now_v7()));
    let store = drover::store::sqlite::SqliteStore::open(
        path.to_str().unwrap(),
        drover::store::sqlite::SqliteOptions::default(),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let writer = store.writer().clone();
    let q = queue(Arc::new(store));
    let plan = Arc::new(Plan::default());
    let wf = five(&plan);
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let rolled = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        q.orchestration(Uuid::nil(), rolled.record.id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let first = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    let again = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.result, drover::InsertResult::Inserted);
    assert_eq!(again.result, drover::InsertResult::KeyExists);
    assert_eq!(again.record.id, first.record.id);
    let w = worker(
        &q,
        Workflows::new().with(five(&plan)),
        Duration::from_millis(50),
    )
    .await;
    wait_status(
        &q,
        first.record.id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    assert_eq!(plan.log(), vec!["s1", "s2", "s3", "s4", "s5"]);
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_in_the_callers_transaction_postgres() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let pool = store.pool().clone();
    let q = queue(store);
    let plan = Arc::new(Plan::default());
    let wf = five(&plan);
    let mut tx = pool.begin().await.unwrap();
    let rolled = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        q.orchestration(Uuid::nil(), rolled.record.id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let mut tx = pool.begin().await.unwrap();
    let first = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    let again = q
        .start_in(&mut *tx, &Start::of(&wf, &St::default()).unwrap().key("k"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.result, drover::InsertResult::Inserted);
    assert_eq!(again.result, drover::InsertResult::KeyExists);
    let w = worker(
        &q,
        Workflows::new().with(five(&plan)),
        Duration::from_millis(50),
    )
    .await;
    wait_status(
        &q,
        first.record.id,
        &[OrchestrationStatus::Completed],
        Duration::from_secs(30),
    )
    .await;
    w.shutdown().await;
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}
