//! Issue 23's orchestration defects, each against a real worker: an
//! operator's cancel while a step runs (the step's effect is compensated,
//! newest first with the earlier ones), a step item cancelled through the
//! item API (the sweep repairs the record instead of leaving it `running`
//! for ever), the operate permission on signal, cancel and resume,
//! `drover_enqueued_total` for step items, the runner's four strategies,
//! and (PostgreSQL) a signal committing while a park's transaction is open.
//!
//! Synchronised on semaphores the steps hold, on rows (the record's status)
//! and on lock waits the database reports; the only time bounds are
//! correctness bounds with margins.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::orchestration::{
    Next, Orchestration, OrchestrationStatus, ResumeParked, SignalOutcome, Start, StepError,
    Workflow, WorkflowStrategy, Workflows,
};
use drover::queue::{Principal, Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::Store;
use drover::worker::{RunningWorker, WorkerSettings};
use drover::{ErrorKind, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;
use uuid::Uuid;

const STRATEGY: WorkflowStrategy = WorkflowStrategy {
    compensation: "each completed step's compensation, newest first",
    resume: "parked records resumed by the sweep or a signal",
};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct St {
    n: u32,
}

/// What ran, and the gate `s2` holds at.
struct Plan {
    log: Mutex<Vec<String>>,
    /// One permit when `s2` has started.
    entered: Semaphore,
    /// `s2` waits for a permit here (none: it runs straight through).
    gate: Option<Semaphore>,
}

impl Plan {
    fn new(gated: bool) -> Arc<Plan> {
        Arc::new(Plan {
            log: Mutex::new(Vec::new()),
            entered: Semaphore::new(0),
            gate: gated.then(|| Semaphore::new(0)),
        })
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// s1 → s2 → s3 → complete, each with a compensation; s2 holds at the gate.
fn three(plan: &Arc<Plan>, lane: &str) -> Workflow<St> {
    let names = ["s1", "s2", "s3"];
    let mut w = Workflow::<St>::new("three", STRATEGY)
        .lane(lane)
        .max_attempts(2);
    for (i, name) in names.iter().copied().enumerate() {
        let next = names.get(i + 1).copied();
        let p = plan.clone();
        w = w.step(name, move |_cx, s: St| {
            let p = p.clone();
            async move {
                if name == "s2" {
                    p.entered.add_permits(1);
                    if let Some(g) = &p.gate {
                        let _permit = g.acquire().await.map_err(StepError::fatal)?;
                    }
                }
                p.log.lock().unwrap().push(name.to_owned());
                let st = St { n: s.n + 1 };
                Ok(match next {
                    Some(n) => Next::step(n, st),
                    None => Next::complete(json!({"steps": st.n}), st),
                })
            }
        });
        let p = plan.clone();
        w = w.compensate(name, move |_cx, _s| {
            let p = p.clone();
            async move {
                p.log.lock().unwrap().push(format!("undo:{name}"));
                Ok(())
            }
        });
    }
    w
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

async fn worker(q: &Queue, w: Workflows, lane: &str) -> RunningWorker {
    Worker::builder(q.clone())
        .settings(WorkerSettings {
            capacity: 4,
            lanes: vec![lane.to_owned()],
            heartbeat_cron: None,
            lease: Duration::from_secs(6),
            renew_interval: Duration::from_secs(2),
            renew_timeout: Duration::from_millis(400),
            poll_interval: Duration::from_millis(50),
            sweep_interval: Duration::from_millis(250),
            shutdown_grace: Duration::from_secs(5),
            metrics_addr: None,
            ..WorkerSettings::default()
        })
        .workflows(w)
        .build()
        .expect("build")
        .start()
        .await
        .expect("start")
}

async fn wait_status(q: &Queue, id: Uuid, want: OrchestrationStatus) -> Orchestration {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = q.orchestration(Uuid::nil(), id).await.expect("read");
        if r.status == want {
            return r;
        }
        assert!(
            Instant::now() < end,
            "orchestration {id} never reached {want}: {} at step {} ({:?}), history {:#?}",
            r.status,
            r.step,
            r.error,
            r.history
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn start(q: &Queue, w: &Workflow<St>) -> Uuid {
    q.start(&Start::of(w, &St::default()).unwrap())
        .await
        .expect("start")
        .record
        .id
}

/// Defect 4: an operator cancels while s2 runs. The cancel is a request;
/// s2's transition lands; compensation starts from s2 (the step just
/// finished), then s1. s3 never runs.
async fn cancel_during_a_running_step_compensates_it(store: Arc<dyn Store>) {
    let q = queue(store);
    let plan = Plan::new(true);
    let w = worker(
        &q,
        Workflows::new().with(three(&plan, "default")),
        "default",
    )
    .await;
    let id = start(&q, &three(&plan, "default")).await;
    plan.entered.acquire().await.unwrap().forget();
    let asked = q
        .cancel_orchestration(&Principal::system(), Uuid::nil(), id)
        .await
        .expect("cancel");
    assert_eq!(asked.status, OrchestrationStatus::Running, "a request");
    assert!(asked.cancel_requested);
    plan.gate.as_ref().unwrap().add_permits(1);
    let r = wait_status(&q, id, OrchestrationStatus::Cancelled).await;
    w.shutdown().await;
    assert_eq!(plan.log(), ["s1", "s2", "undo:s2", "undo:s1"]);
    assert!(r.completed.is_empty(), "{:?}", r.completed);
    // Cancelling again is refused: it has finished.
    assert_eq!(
        q.cancel_orchestration(&Principal::system(), Uuid::nil(), id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
}

/// Defect 5: the first step's item is cancelled through the item API. The
/// record is counted as stranded, and the sweep's repair moves it out of
/// `running`: the step (which may have applied) is compensated and the
/// orchestration ends `cancelled`.
async fn cancelled_step_item_is_repaired_by_the_sweep(store: Arc<dyn Store>) {
    let q = queue(store.clone());
    let plan = Plan::new(false);
    let id = start(&q, &three(&plan, "default")).await;
    let key = format!("{}:{id}:1", drover::orchestration::STEP_KIND);
    let item = store
        .item_get_by_key(Uuid::nil(), &key)
        .await
        .unwrap()
        .expect("step item");
    q.cancel(&Principal::system(), Uuid::nil(), item.id)
        .await
        .expect("cancel the item");
    let parked_before = store.orchestration_parked_count().await.unwrap();
    assert_eq!(parked_before, 1, "a stranded record is counted");
    ResumeParked::default().run_once(&q).await.expect("sweep");
    let r = q.orchestration(Uuid::nil(), id).await.unwrap();
    assert_eq!(r.status, OrchestrationStatus::Compensating, "{r:?}");
    assert!(r.cancel_requested);
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("cancelled")),
        "{:?}",
        r.error
    );
    assert_eq!(store.orchestration_parked_count().await.unwrap(), 0);
    let w = worker(
        &q,
        Workflows::new().with(three(&plan, "default")),
        "default",
    )
    .await;
    wait_status(&q, id, OrchestrationStatus::Cancelled).await;
    w.shutdown().await;
    assert_eq!(plan.log(), ["undo:s1"]);
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
                let dir = std::env::temp_dir().join(format!("drover-ocx-{}.db", Uuid::now_v7()));
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

on_every_backend!(
    cancel_running_step,
    cancel_during_a_running_step_compensates_it
);
on_every_backend!(
    cancelled_step_item,
    cancelled_step_item_is_repaired_by_the_sweep
);

/// A workflow with a blank strategy is refused when the worker is built.
#[test]
fn blank_strategy_refused() {
    let w = Workflow::<St>::new(
        "blank",
        WorkflowStrategy {
            compensation: " ",
            resume: "sweep",
        },
    )
    .step("s1", |_cx, s| async move { Ok(Next::step("s1", s)) });
    let err = Worker::builder(Queue::memory())
        .workflows(Workflows::new().with(w))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("compensation"), "{err}");
}

/// Signal, cancel and resume need the operate permission on the tenant.
#[tokio::test]
async fn signal_cancel_resume_need_the_operate_permission() {
    let q = queue(Arc::new(drover::store::memory::MemoryStore::new()));
    let plan = Plan::new(false);
    let id = start(&q, &three(&plan, "default")).await;
    let reader = Principal::new(Uuid::now_v7(), Uuid::nil(), ["work.enqueue"]);
    let other = Principal::new(
        Uuid::now_v7(),
        Uuid::now_v7(),
        [drover::queue::OPERATE_PERMISSION],
    );
    for p in [&reader, &other] {
        let sig = q
            .signal(p, Uuid::nil(), id, "go", json!(null), None)
            .await
            .unwrap_err();
        assert_eq!(sig.kind(), ErrorKind::Forbidden, "{sig}");
        let cancel = q
            .cancel_orchestration(p, Uuid::nil(), id)
            .await
            .unwrap_err();
        assert_eq!(cancel.kind(), ErrorKind::Forbidden, "{cancel}");
        let resume = q
            .resume_orchestration(p, Uuid::nil(), id)
            .await
            .unwrap_err();
        assert_eq!(resume.kind(), ErrorKind::Forbidden, "{resume}");
    }
    let r = q.orchestration(Uuid::nil(), id).await.unwrap();
    assert!(
        !r.cancel_requested && r.version == 1,
        "nothing changed: {r:?}"
    );
    let operator = Principal::new(
        Uuid::now_v7(),
        Uuid::nil(),
        [drover::queue::OPERATE_PERMISSION],
    );
    let out = q
        .signal(&operator, Uuid::nil(), id, "go", json!(null), None)
        .await
        .unwrap();
    assert_eq!(out, SignalOutcome::Kept);
    q.cancel_orchestration(&operator, Uuid::nil(), id)
        .await
        .unwrap();
}

/// `drover_enqueued_total` counts step items inserted by the start and by
/// transitions, labelled as a direct enqueue (lane, kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_total_counts_step_items() {
    let handle = crate::recorder::prometheus();
    let lane = "enqcount";
    let q = queue(Arc::new(drover::store::memory::MemoryStore::new()));
    let plan = Plan::new(false);
    let w = worker(&q, Workflows::new().with(three(&plan, lane)), lane).await;
    let id = start(&q, &three(&plan, lane)).await;
    wait_status(&q, id, OrchestrationStatus::Completed).await;
    w.shutdown().await;
    let text = handle.render();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("drover_enqueued_total")
                && l.contains(&format!("lane=\"{lane}\""))
                && l.contains("kind=\"drover.step\"")
        })
        .unwrap_or_else(|| panic!("no step item counted:\n{text}"));
    // The start's item, then s1 → s2 and s2 → s3; the completion inserts none.
    assert!(line.ends_with(" 3"), "{line}");
}

/// The workflow runner's role declares the four strategies every role
/// declares, besides its compensation and resume.
#[test]
fn workflow_runner_declares_all_four_strategies() {
    let plan = Plan::new(false);
    let worker = Worker::builder(Queue::memory())
        .workflows(Workflows::new().with(three(&plan, "default")))
        .build()
        .expect("build");
    let role = worker
        .registry()
        .roles()
        .iter()
        .find(|r| r.role == "workflow runner")
        .expect("the runner's role");
    for want in [
        "idempotency",
        "retry",
        "checkpoint",
        "recovery",
        "compensation",
        "resume",
    ] {
        assert!(
            role.strategies
                .iter()
                .any(|(k, v)| k == want && !v.trim().is_empty()),
            "{want} missing: {:?}",
            role.strategies
        );
    }
}

/// Waits until a backend of this database waits on a lock running a
/// statement like `pattern` (read from `pg_stat_activity`, not a sleep).
async fn wait_lock_wait(pool: &sqlx::PgPool, pattern: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND wait_event_type = 'Lock' AND query LIKE $1",
        )
        .bind(pattern)
        .fetch_one(pool)
        .await
        .unwrap();
        if n > 0 {
            return;
        }
        assert!(Instant::now() < end, "nobody waits on {pattern}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// PostgreSQL: a signal committing while a park's transaction is open is
/// not lost. The signal takes the record's row lock and is held at its
/// insert (a test lock on the signals table); the park's transaction opens
/// (its item completed) and waits on the row lock; the signal then commits
/// `kept`, and the park, reading it under the lock, consumes it and runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn signal_committing_while_a_park_is_open_is_not_lost_postgres() {
    use drover::orchestration::OrchestrationStore;
    use drover::orchestration::{RecordWrite, STEP_KIND, Transition};
    use drover::store::{ClaimParams, ClaimRef, ItemStore};
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let pool = store.pool().clone();
    let q = queue(store.clone());
    let plan = Plan::new(false);
    let id = start(&q, &three(&plan, "default")).await;
    let got = store
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![STEP_KIND.into()],
            worker_id: "parker".into(),
            lease: Duration::from_secs(60),
            limit: 1,
        })
        .await
        .unwrap();
    let claim = ClaimRef::of(&got[0]).unwrap();
    let rec = q.orchestration(Uuid::nil(), id).await.unwrap();
    let mut w = RecordWrite::of(&rec);
    w.status = OrchestrationStatus::Parked;
    w.step = "s2".into();
    w.completed.push("s1".into());
    w.parked_until = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    w.waiting_for = Some("go".into());
    w.timeout_step = Some("s3".into());
    let park = Transition {
        tenant_id: rec.tenant_id,
        id,
        expected_version: rec.version,
        write: w,
        enqueue: None,
        consume_signal: None,
    };
    let mut holder = pool.begin().await.unwrap();
    sqlx::query(&format!(
        "LOCK TABLE \"{schema}\".orchestration_signals IN SHARE ROW EXCLUSIVE MODE"
    ))
    .execute(&mut *holder)
    .await
    .unwrap();
    let sq = q.clone();
    let signal = tokio::spawn(async move {
        sq.signal(
            &Principal::system(),
            Uuid::nil(),
            id,
            "go",
            json!("yes"),
            None,
        )
        .await
    });
    wait_lock_wait(&pool, "%INSERT INTO orchestration_signals%").await;
    let ps = store.clone();
    let parked = tokio::spawn(async move { ps.orchestration_advance(&claim, &park).await });
    wait_lock_wait(&pool, "%UPDATE orchestrations%").await;
    holder.commit().await.unwrap();
    assert_eq!(signal.await.unwrap().unwrap(), SignalOutcome::Kept);
    let after = parked.await.unwrap().unwrap();
    assert_eq!(after.status, OrchestrationStatus::Running, "{after:?}");
    assert_eq!(after.waiting_for, None);
    let sigs = store
        .orchestration_signal_list(Uuid::nil(), id)
        .await
        .unwrap();
    assert_eq!(sigs.len(), 1);
    assert!(sigs[0].consumed_at.is_some(), "the park consumed it");
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}
