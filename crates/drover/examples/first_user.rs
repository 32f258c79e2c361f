//! The README's library examples as one program: a producer and a worker
//! in one process. `cargo test` builds it; run it with
//! `cargo run -p drover --example first_user [DATABASE_URL]` (default
//! `memory:`).

use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::ConnectOptions;
use drover::worker::{Done, Handler, Outcome, ResultExt, Strategy, Worker, WorkerSettings};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

// A kind is a type: its payload, its name, its lane and budget, and the
// permission a producer needs to enqueue it.
#[derive(Serialize, Deserialize)]
struct SendWelcome {
    user_id: Uuid,
}

impl Kind for SendWelcome {
    const NAME: &'static str = "send_welcome";
    const LANE: &'static str = "mail"; // default "default"
    const MAX_ATTEMPTS: i32 = 5; // the default
    const PERMISSION: &'static str = "mail.send"; // default "drover.enqueue"
}

struct Mailer;

impl Handler for Mailer {
    type Job = SendWelcome;
    // Declared in code, printed by `drover handlers`; a blank one is refused.
    const STRATEGY: Strategy = Strategy {
        idempotency: "the provider dedupes on the message id = item id",
        retry: "default backoff, 5 attempts",
        checkpoint: "none: one send, a rerun sends again (deduped)",
        recovery: "a crashed send is swept after its lease and sent again (deduped)",
    };
    // What the handler's own calls need: the kind's PERMISSION must cover it.
    const REQUIRES: &'static [&'static str] = &["mail.send"];

    async fn handle(&self, cx: &JobContext, job: SendWelcome) -> Outcome {
        send(job.user_id, cx.id()).await.retryable()?;
        Ok(Done::Completed)
    }
}

async fn send(_user: Uuid, _message_id: Uuid) -> Result<(), std::io::Error> {
    Ok(())
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".into());
    let queue = Queue::connect_with(
        &url,
        &ConnectOptions {
            pool_size: 12,
            ..ConnectOptions::default()
        },
    )
    .await?;
    queue.migrate().await?;

    // One item, keyed: a retried enqueue meets its own item.
    let user_id = Uuid::now_v7();
    queue
        .enqueue(SendWelcome { user_id })
        .key(format!("welcome:{user_id}"))
        .delay(Duration::from_millis(10))
        .await?;

    // Many, in one statement, each with its kind's lane, budget and
    // permission.
    let producer = Principal::new(Uuid::now_v7(), Uuid::nil(), ["mail.send"]);
    queue
        .enqueue_batch()
        .principal(producer)
        .extend((0..99).map(|_| SendWelcome {
            user_id: Uuid::now_v7(),
        }))
        .await?;

    // Settings first or last: explicit calls win either way.
    let running = Worker::builder(queue.clone())
        .settings(WorkerSettings::from_env()?)
        .lane("mail")
        // The built-in heartbeat's items go to `default`: drain it here too
        // (a fleet whose other workers drain it says .drained_elsewhere("default")).
        .lane("default")
        .capacity(8)
        .metrics_addr(None) // the service serves its own /metrics
        .handler(Mailer)
        .build()?
        .start()
        .await?;
    loop {
        let left: i64 = queue
            .counts_lane("mail")
            .await?
            .iter()
            .filter(|r| r.status != drover::Status::Done)
            .map(|r| r.count)
            .sum();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = running.shutdown().await; // drain first
    tracing::info!(?report, "all sent");
    Ok(())
}
