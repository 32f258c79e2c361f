//! Rate limits through the queue and the worker runtime, on the memory
//! store with a clock moved by hand: a kind's `RATE` is declared when a
//! worker starts; the operator's rate wins until cleared; a claim that
//! comes back short because a rate holds work back says how long until the
//! rate allows the next start (what the claim loop waits for instead of
//! its poll), and the item is claimable at that instant; only an operator
//! not confined to a tenant sets a rate.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::ManualClock;
use drover::store::limits::{LimitScope, LimitSource};
use drover::store::memory::MemoryStore;
use drover::store::rates::Rate;
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Call {
    n: u32,
}

impl Kind for Call {
    const NAME: &'static str = "rated_call";
    const RATE: Option<Rate> = Some(Rate::per(1, Duration::from_secs(2)));
}

struct Caller;

impl Handler for Caller {
    type Job = Call;
    const STRATEGY: Strategy = Strategy {
        idempotency: "a test call has no effect",
        retry: "default",
        checkpoint: "none",
        recovery: "runs again",
    };

    async fn handle(&self, _cx: &JobContext, _job: Call) -> Outcome {
        Ok(Done::Completed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_is_declared_overridden_and_waited_for() {
    let clock = Arc::new(ManualClock::new());
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let q = Queue::new(store);
    let system = Principal::system();
    let scope = LimitScope::Kind("rated_call".into());

    // The kind's RATE is in force once a worker started.
    let running = Worker::builder(q.clone())
        .metrics_addr(None)
        .handler(Caller)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    running.shutdown().await;
    let rates = q.rates().await.unwrap();
    assert_eq!(rates.len(), 1, "{rates:?}");
    assert_eq!(rates[0].setting.source, LimitSource::Code);
    assert_eq!(rates[0].setting.rate, Rate::per(1, Duration::from_secs(2)));

    // The operator's wins.
    let op = Rate::per(1, Duration::from_secs(10));
    q.rate_set(&system, &scope, op).await.unwrap();
    assert_eq!(q.rates().await.unwrap()[0].setting.rate, op);

    for n in 0..2 {
        q.enqueue(Call { n }).await.unwrap();
    }
    let lease = Duration::from_secs(60);
    let first = q.claim("default", &[], "w", lease, 1).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.rate_wait, None, "a full batch asks nothing");
    let held = q.claim("default", &[], "w", lease, 1).await.unwrap();
    assert!(held.items.is_empty(), "over the rate");
    assert_eq!(
        held.rate_wait,
        Some(Duration::from_secs(10)),
        "the claimer waits for the rate's instant"
    );
    let next_start = q.rates().await.unwrap()[0].next_start_at.expect("held");
    clock.advance(Duration::from_secs(10));
    let then = q.claim("default", &[], "w", lease, 1).await.unwrap();
    assert_eq!(then.items.len(), 1, "claimable at the instant");
    assert_eq!(then.items[0].item().updated_at, next_start);

    // Cleared: the code's again.
    assert!(q.rate_clear(&system, &scope).await.unwrap());
    let rates = q.rates().await.unwrap();
    assert_eq!(rates[0].setting.source, LimitSource::Code);

    // Only an operator not confined to a tenant; only a valid rate.
    let tenant_op = Principal::new(Uuid::from_u128(1), Uuid::from_u128(2), ["drover.operate"]);
    let e = q.rate_set(&tenant_op, &scope, op).await.unwrap_err();
    assert!(matches!(e, drover::Error::Forbidden(_)), "{e}");
    let e = q
        .rate_set(&system, &scope, Rate::per(0, Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(e, drover::Error::InvalidInput { .. }), "{e}");
}
