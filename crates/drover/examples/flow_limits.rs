//! Flow control in one program: a kind whose items belong to a group (the
//! customer), a per-group limit of 1 and a kind limit of 3 declared in
//! code, and an operator raising the kind limit at run time. The handler
//! records how many run at once, per customer and in all, and the program
//! checks the limits held. `cargo test` builds it; run it with
//! `cargo run -p drover --example flow_limits [DATABASE_URL]` (default
//! `memory:`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::limits::LimitScope;
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct SyncCustomer {
    customer: u32,
}

impl Kind for SyncCustomer {
    const NAME: &'static str = "sync_customer";
    // Declared in code; `drover limits set` overrides either.
    const CONCURRENCY: Option<u32> = Some(3);
    const GROUP_CONCURRENCY: Option<u32> = Some(1);

    fn group(&self) -> Option<String> {
        Some(format!("customer:{}", self.customer))
    }
}

/// What ran at once: in all, and per customer.
#[derive(Default)]
struct Seen {
    now: AtomicUsize,
    most: AtomicUsize,
    per_customer: Mutex<HashMap<u32, (usize, usize)>>,
}

struct Syncer(Arc<Seen>);

impl Handler for Syncer {
    type Job = SyncCustomer;
    const STRATEGY: Strategy = Strategy {
        idempotency: "the sync is a full overwrite of the customer's copy",
        retry: "default backoff, 5 attempts",
        checkpoint: "none: one call",
        recovery: "a crashed sync is swept after its lease and runs again",
    };

    async fn handle(&self, _cx: &JobContext, job: SyncCustomer) -> Outcome {
        let seen = &self.0;
        let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most.fetch_max(now, Ordering::SeqCst);
        {
            let mut per = seen.per_customer.lock().unwrap_or_else(|p| p.into_inner());
            let e = per.entry(job.customer).or_default();
            e.0 += 1;
            e.1 = e.1.max(e.0);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        {
            let mut per = seen.per_customer.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = per.get_mut(&job.customer) {
                e.0 -= 1;
            }
        }
        seen.now.fetch_sub(1, Ordering::SeqCst);
        Ok(Done::Completed)
    }
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".into());
    let queue = Queue::connect(&url).await?;
    queue.migrate().await?;
    queue
        .enqueue_batch()
        .extend((0..60).map(|n| SyncCustomer { customer: n % 6 }))
        .await?;

    let seen = Arc::new(Seen::default());
    let running = Worker::builder(queue.clone())
        .capacity(20)
        .metrics_addr(None)
        .handler(Syncer(seen.clone()))
        .build()?
        .start()
        .await?;
    // An operator raises the kind's limit while the worker runs: it wins
    // over the code's 3 until cleared.
    queue
        .limit_set(
            &Principal::system(),
            &LimitScope::Kind("sync_customer".into()),
            5,
        )
        .await?;
    loop {
        let left: i64 = queue
            .counts_lane("default")
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
    running.shutdown().await;
    let most = seen.most.load(Ordering::SeqCst);
    let per_customer = seen
        .per_customer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .map(|(_, m)| *m)
        .max()
        .unwrap_or(0);
    tracing::info!(most, per_customer, "done");
    assert!(most <= 5, "at most the kind's limit at once: {most}");
    assert!(
        per_customer <= 1,
        "one per customer at once: {per_customer}"
    );
    Ok(())
}
