//! A step whose last attempt ends without the runner writing a transition
//! (the handler timed out, or its lease expired with no attempt left) must
//! not leave the orchestration `running` forever: the sweep finds the
//! dead-lettered step item and takes the failure path, compensation in
//! reverse, exactly as for a final error the step returned. On every
//! backend (memory, SQLite, PostgreSQL).
//!
//! Synchronised on the record's status; the only time bounds are
//! correctness bounds with margins.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::Worker;
use drover::item::Status;
use drover::orchestration::{
    Next, Orchestration, OrchestrationStatus, STEP_KIND, Start, StepContext, StepError, Workflow,
    WorkflowStrategy, Workflows,
};
use drover::queue::{Queue, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::{ClaimParams, Store};
use drover::worker::{RunningWorker, WorkerSettings};
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

/// Which step or compensation never returns, and what ran.
#[derive(Default)]
struct Plan {
    hang: Option<&'static str>,
    hang_undo: Option<&'static str>,
    fail: Option<&'static str>,
    log: Mutex<Vec<String>>,
}

impl Plan {
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// s1 → s2 → s3 → s4, each with a compensation; two attempts per step.
fn four(plan: &Arc<Plan>) -> Workflow<St> {
    let names = ["s1", "s2", "s3", "s4"];
    let mut w = Workflow::<St>::new("four", STRATEGY).max_attempts(2);
    for (i, name) in names.iter().copied().enumerate() {
        let next = names.get(i + 1).copied();
        let p = plan.clone();
        w = w.step(name, move |_cx: StepContext, s: St| {
            let p = p.clone();
            async move {
                if p.hang == Some(name) {
                    // Never returns: only the handler timeout ends it.
                    std::future::pending::<()>().await;
                }
                if p.fail == Some(name) {
                    return Err(StepError::Fatal(format!("{name} refused")));
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
                if p.hang_undo == Some(name) {
                    std::future::pending::<()>().await;
                }
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

async fn worker(q: &Queue, w: Workflows) -> RunningWorker {
    Worker::builder(q.clone())
        .settings(WorkerSettings {
            capacity: 4,
            lease: Duration::from_secs(6),
            renew_interval: Duration::from_secs(2),
            renew_timeout: Duration::from_millis(400),
            poll_interval: Duration::from_millis(50),
            sweep_interval: Duration::from_millis(250),
            handler_timeout: Duration::from_millis(300),
            shutdown_grace: Duration::from_secs(2),
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

/// The step item of `r` at `version`: dead-lettered.
async fn step_item_failed(store: &Arc<dyn Store>, r: &Orchestration, version: i64) {
    let key = format!("{STEP_KIND}:{}:{version}", r.id);
    let item = store
        .item_get_by_key(r.tenant_id, &key)
        .await
        .unwrap()
        .expect("the dead step's item");
    assert_eq!(item.status, Status::Failed, "{item:?}");
}

/// s3's last attempt times out: its effect may have applied, so s3, s2
/// and s1 are compensated, in that order (s3's compensation tolerates
/// "never applied").
async fn last_attempt_timeout_compensates_in_reverse(store: Arc<dyn Store>) {
    let q = queue(store.clone());
    let plan = Arc::new(Plan {
        hang: Some("s3"),
        ..Plan::default()
    });
    let w = four(&plan);
    let running = worker(&q, Workflows::new().with(four(&plan))).await;
    let id = q
        .start(&Start::of(&w, &St::default()).unwrap())
        .await
        .unwrap()
        .record
        .id;
    let r = wait_status(&q, id, OrchestrationStatus::Compensated).await;
    running.shutdown().await;
    assert_eq!(plan.log(), ["s1", "s2", "undo:s3", "undo:s2", "undo:s1"]);
    let err = r.error.clone().unwrap_or_default();
    assert!(
        err.contains("step s3 failed") && err.contains("timed out"),
        "{err}"
    );
    assert!(
        r.history
            .iter()
            .any(|h| h.step == "s3" && h.attempt == 2 && h.outcome.starts_with("failed:")),
        "{:#?}",
        r.history
    );
}

/// A compensation's last attempt times out: `compensation_failed`, and the
/// earlier step's compensation never runs.
async fn compensation_timeout_ends_compensation_failed(store: Arc<dyn Store>) {
    let q = queue(store.clone());
    let plan = Arc::new(Plan {
        fail: Some("s3"),
        hang_undo: Some("s2"),
        ..Plan::default()
    });
    let w = four(&plan);
    let running = worker(&q, Workflows::new().with(four(&plan))).await;
    let id = q
        .start(&Start::of(&w, &St::default()).unwrap())
        .await
        .unwrap()
        .record
        .id;
    let r = wait_status(&q, id, OrchestrationStatus::CompensationFailed).await;
    running.shutdown().await;
    assert_eq!(plan.log(), ["s1", "s2"]);
    assert_eq!(r.step, "s2");
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("compensation of s2 failed")),
        "{:?}",
        r.error
    );
    step_item_failed(&store, &r, r.version - 1).await;
}

/// The worker holding s1's last attempt dies (its lease expires): the sweep
/// dead-letters the item, and the orchestration takes the failure path
/// instead of staying `running`.
async fn lease_expired_on_last_attempt_takes_failure_path(store: Arc<dyn Store>) {
    let q = queue(store.clone());
    let plan = Arc::new(Plan::default());
    let w = four(&plan).max_attempts(1);
    let id = q
        .start(&Start::of(&w, &St::default()).unwrap())
        .await
        .unwrap()
        .record
        .id;
    // A worker that claims s1's only attempt and dies with it.
    let got = store
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![STEP_KIND.into()],
            worker_id: "crashed".into(),
            lease: Duration::from_millis(300),
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let running = worker(&q, Workflows::new().with(four(&plan).max_attempts(1))).await;
    let r = wait_status(&q, id, OrchestrationStatus::Compensated).await;
    running.shutdown().await;
    // s1 may have applied before its worker died: it is compensated.
    assert_eq!(plan.log(), ["undo:s1"]);
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("lease expired")),
        "{:?}",
        r.error
    );
    step_item_failed(&store, &r, 1).await;
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
                let dir = std::env::temp_dir().join(format!("drover-dead-{}.db", Uuid::now_v7()));
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
    last_attempt_timeout,
    last_attempt_timeout_compensates_in_reverse
);
on_every_backend!(
    compensation_timeout,
    compensation_timeout_ends_compensation_failed
);
on_every_backend!(
    lease_expired_last_attempt,
    lease_expired_on_last_attempt_takes_failure_path
);
