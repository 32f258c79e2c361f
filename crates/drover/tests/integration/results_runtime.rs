//! Results and progress through the worker: a handler's typed result is
//! stored with its completion and read back typed; an oversized result
//! fails the item saying so; progress reported in a tight loop is written
//! at most once per interval, the last report lands, and the next run of a
//! retried item reads it back as its checkpoint; unique-while-active
//! through the typed builder.

use std::sync::Arc;
use std::time::Duration;

use drover::item::Progress;
use drover::queue::{JobContext, Kind, Queue, Returns};
use drover::store::Store;
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, WorkerSettings};
use drover::{InsertResult, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

const STRATEGY: Strategy = Strategy {
    idempotency: "pure: running twice is harmless",
    retry: "default backoff",
    checkpoint: "progress note: the cursor it reached",
    recovery: "swept and run again from the checkpoint",
};

#[derive(Serialize, Deserialize)]
struct Sum {
    upto: u64,
}
impl Kind for Sum {
    const NAME: &'static str = "sum";
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Total {
    total: u64,
}
impl Returns for Sum {
    type Output = Total;
}

/// Sums 1..=upto, reporting progress on every step (a tight loop), and
/// fails its first attempt half-way, so the second resumes from the
/// checkpoint the first left.
struct Summer;
impl Handler for Summer {
    type Job = Sum;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: Sum) -> Outcome {
        let from = cx
            .progress()
            .and_then(|p| p.data)
            .and_then(|d| d["next"].as_u64())
            .unwrap_or(1);
        let mut total = cx
            .progress()
            .and_then(|p| p.data)
            .and_then(|d| d["total"].as_u64())
            .unwrap_or(0);
        for i in from..=job.upto {
            total += i;
            cx.report_progress(Progress {
                value: Some(i as f64 * 100.0 / job.upto as f64),
                data: Some(json!({"next": i + 1, "total": total})),
            })
            .await
            .map_err(JobError::retry)?;
            if cx.attempt() == 1 && i == job.upto / 2 {
                return Err(JobError::Retry("planned failure half-way".into()));
            }
        }
        Done::output(&Total { total })
    }
}

#[derive(Serialize, Deserialize)]
struct Huge;
impl Kind for Huge {
    const NAME: &'static str = "huge";
}
struct HugeHandler;
impl Handler for HugeHandler {
    type Job = Huge;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Huge) -> Outcome {
        Done::output(&"x".repeat(300 * 1024))
    }
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 2,
        lease: Duration::from_millis(1500),
        renew_interval: Duration::from_millis(300),
        renew_timeout: Duration::from_millis(100),
        heartbeat_interval: Duration::from_millis(100),
        poll_interval: Duration::from_millis(50),
        sweep_interval: Duration::from_millis(200),
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

fn queue(store: Arc<dyn Store>) -> Queue {
    Queue::new(store).with_config(drover::queue::QueueConfig {
        retry: drover::rules::RetryPolicy {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(50),
            ..Default::default()
        },
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn typed_result_progress_checkpoint_and_oversized_result() {
    let q = queue(Arc::new(MemoryStore::new()));
    let sum = q.enqueue(Sum { upto: 2000 }).await.unwrap().item.id;
    let huge = q.enqueue(Huge).await.unwrap().item.id;
    let w = Worker::builder(q.clone())
        .settings(settings())
        .handler(Summer)
        .handler(HugeHandler)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let s = q
        .wait_final(Uuid::nil(), sum, Duration::from_secs(30))
        .await
        .unwrap();
    let h = q
        .wait_final(Uuid::nil(), huge, Duration::from_secs(30))
        .await
        .unwrap();
    w.shutdown().await;

    assert_eq!((s.status, s.attempts), (Status::Done, 1));
    let total = q.result::<Sum>(Uuid::nil(), sum).await.unwrap();
    assert_eq!(
        total,
        Some(Total {
            total: 2000 * 2001 / 2
        }),
        "resumed, not restarted"
    );
    // The last report was flushed at the end of the run.
    let p = s.progress.expect("progress kept");
    assert_eq!(p.value, Some(100.0));
    assert_eq!(
        p.data,
        Some(json!({"next": 2001, "total": 2000 * 2001 / 2}))
    );

    assert_eq!(
        h.status,
        Status::Failed,
        "an oversized result fails the item"
    );
    assert!(
        h.last_error.as_deref().unwrap_or("").contains("result"),
        "{:?}",
        h.last_error
    );
    assert_eq!(h.result, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn progress_in_a_tight_loop_is_rate_limited() {
    let q = Queue::memory();
    let id = q.enqueue(Sum { upto: 1 }).await.unwrap().item.id;
    let got = q
        .claim("default", &[], "w", Duration::from_secs(30), 1)
        .await
        .unwrap();
    let cx = got.items.into_iter().next().expect("claimed");
    assert_eq!(cx.id(), id);
    let stored = async || q.get(Uuid::nil(), id).await.unwrap().progress;
    for i in 0..1000 {
        cx.report_progress(Progress {
            value: Some(f64::from(i) / 10.0),
            data: None,
        })
        .await
        .unwrap();
    }
    // A loop this fast fits in one interval: the first report is written,
    // the rest wait in memory, latest wins.
    assert_eq!(stored().await.and_then(|p| p.value), Some(0.0));
    assert_eq!(cx.progress().and_then(|p| p.value), Some(99.9));
    cx.flush_progress().await.unwrap();
    assert_eq!(stored().await.and_then(|p| p.value), Some(99.9));
    // Bad reports are refused before any write.
    assert!(cx.report_progress(Progress::default()).await.is_err());
    assert!(
        cx.checkpoint(&"y".repeat(9 * 1024)).await.is_err(),
        "a note over 8 KiB"
    );
    assert!(cx.set_progress(f64::NAN).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unique_while_active_through_the_typed_builder() {
    let q = Queue::memory();
    let first = q
        .enqueue(Sum { upto: 1 })
        .key("sum:1")
        .unique_while_active()
        .await
        .unwrap();
    assert_eq!(first.result, InsertResult::Inserted);
    let again = q
        .enqueue(Sum { upto: 1 })
        .key("sum:1")
        .unique_while_active()
        .await
        .unwrap();
    assert_eq!(
        (again.result, again.item.id),
        (InsertResult::KeyExists, first.item.id)
    );
    let no_key = q.enqueue(Sum { upto: 1 }).unique_while_active().await;
    assert!(no_key.is_err(), "unique while active needs a key");
}
