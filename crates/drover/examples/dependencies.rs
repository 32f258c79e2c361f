//! Work that waits for work, in one program: a small DAG (fetch, then two
//! resizes, then publish once both are done) enqueued in one call with
//! caller-chosen ids, and a batch of three whose callback runs once all
//! three are final. The handler records the order it ran in, and the
//! program checks that no step started before its dependencies were done.
//! `cargo test` builds it; run it with
//! `cargo run -p drover --example dependencies [DATABASE_URL]` (default
//! `memory:`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover::NewItem;
use drover::queue::{BatchSpec, JobContext, Kind, Principal, Queue};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Step {
    name: String,
}

impl Kind for Step {
    const NAME: &'static str = "step";
}

/// The batch's callback: drover fills in the batch id and the counts.
#[derive(Serialize, Deserialize)]
struct AllThumbnailsDone {
    batch: Uuid,
    done: i64,
    failed: i64,
    cancelled: i64,
}

impl Kind for AllThumbnailsDone {
    const NAME: &'static str = "thumbnails.done";
}

struct Steps(Arc<Mutex<Vec<String>>>);

impl Handler for Steps {
    type Job = Step;
    const STRATEGY: Strategy = Strategy {
        idempotency: "each step overwrites its own output",
        retry: "default backoff, 5 attempts",
        checkpoint: "none: one call",
        recovery: "a crashed step is swept after its lease and runs again",
    };

    async fn handle(&self, _cx: &JobContext, job: Step) -> Outcome {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(job.name);
        Ok(Done::Completed)
    }
}

struct Callback(Arc<Mutex<Vec<String>>>);

impl Handler for Callback {
    type Job = AllThumbnailsDone;
    const STRATEGY: Strategy = Strategy {
        idempotency: "records the batch's counts once per batch id",
        retry: "default backoff, 5 attempts",
        checkpoint: "none: one call",
        recovery: "a crashed callback is swept after its lease and runs again",
    };

    async fn handle(&self, _cx: &JobContext, job: AllThumbnailsDone) -> Outcome {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("batch {} done={}", job.batch, job.done));
        Ok(Done::Completed)
    }
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".into());
    let queue = Queue::connect(&url).await?;
    queue.migrate().await?;
    let system = Principal::system();
    let step = |name: &str| NewItem::new("step", serde_json::json!({ "name": name }));

    // The DAG, dependants first: forward references are fine in one call.
    let fetch = step("fetch");
    let small = step("resize-small").with_after([fetch.id]);
    let large = step("resize-large").with_after([fetch.id]);
    let publish = step("publish").with_after([small.id, large.id]);
    queue
        .enqueue_dag(&system, vec![publish, small, large, fetch])
        .await?;

    // A batch: members join in any number of calls, then it is sealed.
    let batch = Uuid::now_v7();
    queue
        .batch_create(&system, BatchSpec::new(batch, "thumbnails.done"))
        .await?;
    for n in 0..3 {
        queue
            .enqueue(Step {
                name: format!("thumb-{n}"),
            })
            .batch(batch)
            .await?;
    }
    queue.batch_seal(system.tenant, batch).await?;

    let ran = Arc::new(Mutex::new(Vec::new()));
    let running = Worker::builder(queue.clone())
        .metrics_addr(None)
        .handler(Steps(ran.clone()))
        .handler(Callback(ran.clone()))
        .build()?
        .start()
        .await?;
    while ran.lock().unwrap_or_else(|p| p.into_inner()).len() < 8 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.shutdown().await;
    let ran = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let at = |name: &str| ran.iter().position(|r| r == name);
    assert!(at("fetch") < at("resize-small") && at("fetch") < at("resize-large"));
    assert!(at("resize-small") < at("publish") && at("resize-large") < at("publish"));
    let callback = ran.iter().position(|r| r.ends_with("done=3"));
    for n in 0..3 {
        assert!(at(&format!("thumb-{n}")) < callback, "{ran:?}");
    }
    tracing::info!(?ran, "done");
    Ok(())
}
