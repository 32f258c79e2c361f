//! `Worker::drain`: a lane run once, inline, with the worker's handlers,
//! on every backend (memory, SQLite, PostgreSQL). Each outcome is counted
//! and written as the claim loop would write it; work a run makes due (a
//! follow-up item, an orchestration's next step) runs in the same drain;
//! work a retry or a snooze puts in the future, another lane's items and
//! kinds no handler takes are left alone.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::item::Status;
use drover::orchestration::{
    Next, OrchestrationStatus, Start, Workflow, WorkflowStrategy, Workflows,
};
use drover::queue::{JobContext, Kind, Queue};
use drover::store::{ListFilter, Store};
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, Worker, WorkerSettings};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Task {
    /// What the handler answers: ok, follow, retry, fatal, panic, snooze, cancel.
    then: String,
}
impl Kind for Task {
    const NAME: &'static str = "task";
    const MAX_ATTEMPTS: i32 = 3;
    // A retry is due an hour later, however slow the drain: not run again.
    fn retry_policy() -> Option<drover::rules::RetryPolicy> {
        Some(drover::rules::RetryPolicy {
            base: Duration::from_secs(3600),
            ..drover::rules::RetryPolicy::default()
        })
    }
}

#[derive(Serialize, Deserialize)]
struct Other {}
impl Kind for Other {
    const NAME: &'static str = "other";
}

struct Tasks {
    queue: Queue,
}
impl Handler for Tasks {
    type Job = Task;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test",
        retry: "test",
        checkpoint: "test",
        recovery: "test",
    };
    async fn handle(&self, _cx: &JobContext, job: Task) -> Outcome {
        match job.then.as_str() {
            "follow" => {
                self.queue
                    .enqueue(Task { then: "ok".into() })
                    .await
                    .map_err(JobError::retry)?;
                Ok(Done::Completed)
            }
            "retry" => Err(JobError::Retry("later".into())),
            "fatal" => Err(JobError::Fatal("never".into())),
            "panic" => panic!("boom"),
            "snooze" => Err(JobError::Snooze(Duration::from_secs(3600))),
            "cancel" => Err(JobError::Cancel("not wanted".into())),
            _ => Ok(Done::Completed),
        }
    }
}

const STRATEGY: WorkflowStrategy = WorkflowStrategy {
    compensation: "none to undo",
    resume: "the next step's item",
};

fn two_steps() -> Workflow<u32> {
    Workflow::new("two_steps", STRATEGY)
        .step(
            "one",
            |_cx, n: u32| async move { Ok(Next::step("two", n + 1)) },
        )
        .step("two", |_cx, n: u32| async move {
            Ok(Next::complete(json!({ "n": n + 1 }), n + 1))
        })
}

async fn count(q: &Queue, status: Status) -> usize {
    q.list(&ListFilter {
        status: Some(status),
        kind: Some("task".into()),
        limit: 100,
        ..ListFilter::default()
    })
    .await
    .unwrap()
    .len()
}

async fn drains_a_lane_once(store: Arc<dyn Store>) {
    let queue = Queue::new(store);
    let worker = Worker::builder(queue.clone())
        .settings(WorkerSettings {
            capacity: 4,
            metrics_addr: None,
            heartbeat_cron: None,
            ..WorkerSettings::default()
        })
        .handler(Tasks {
            queue: queue.clone(),
        })
        .workflows(Workflows::new().with(two_steps()))
        .build()
        .unwrap();
    for then in [
        "ok", "ok", "follow", "retry", "fatal", "panic", "snooze", "cancel",
    ] {
        queue.enqueue(Task { then: then.into() }).await.unwrap();
    }
    let elsewhere = queue
        .enqueue(Task { then: "ok".into() })
        .lane("elsewhere")
        .await
        .unwrap()
        .item
        .id;
    let unhandled = queue.enqueue(Other {}).await.unwrap().item.id;
    let orch = queue
        .start(&Start::new("two_steps", &1u32).unwrap())
        .await
        .unwrap()
        .record
        .id;

    let r = worker.drain("default").await.unwrap();
    // 8 tasks, the follow-up, 2 steps.
    assert_eq!(r.ran, 11, "{r:?}");
    assert_eq!(r.succeeded, 2 + 1 + 1 + 2, "{r:?}");
    assert_eq!((r.retried, r.failed, r.panicked), (1, 1, 1), "{r:?}");
    assert_eq!((r.snoozed, r.cancelled), (1, 1), "{r:?}");
    assert_eq!(
        (r.lease_lost, r.orphaned, r.stopped_at_limit),
        (0, 0, false)
    );

    assert_eq!(count(&queue, Status::Done).await, 4);
    // retry and panic: pending again with their backoff; snooze: an hour.
    assert_eq!(
        count(&queue, Status::Pending).await,
        3 + 1,
        "and the other lane's"
    );
    assert_eq!(count(&queue, Status::Failed).await, 1);
    assert_eq!(count(&queue, Status::Cancelled).await, 1);
    let nil = Uuid::nil();
    assert_eq!(
        queue.get(nil, elsewhere).await.unwrap().status,
        Status::Pending
    );
    assert_eq!(
        queue.get(nil, unhandled).await.unwrap().status,
        Status::Pending
    );
    let rec = queue.orchestration(nil, orch).await.unwrap();
    assert_eq!(rec.status, OrchestrationStatus::Completed);
    assert_eq!(rec.result, Some(json!({ "n": 3 })));

    // Nothing is due now: a second drain runs nothing.
    let again = worker.drain("default").await.unwrap();
    assert_eq!(again.ran, 0, "{again:?}");
    let other_lane = worker.drain("elsewhere").await.unwrap();
    assert_eq!((other_lane.ran, other_lane.succeeded), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory() {
    drains_a_lane_once(Arc::new(drover::store::memory::MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!("drover-drain-{}.db", Uuid::now_v7()));
    let store = drover::store::sqlite::SqliteStore::open(
        path.to_str().unwrap(),
        drover::store::sqlite::SqliteOptions::default(),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    drains_a_lane_once(Arc::new(store)).await;
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    drains_a_lane_once(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_bad_lane_name_is_refused() {
    let queue = Queue::memory();
    let worker = Worker::builder(queue.clone())
        .metrics_addr(None)
        .handler(Tasks { queue })
        .build()
        .unwrap();
    let err = worker.drain("Not A Lane").await.expect_err("bad lane");
    assert_eq!(err.kind(), drover::ErrorKind::InvalidInput);
}
