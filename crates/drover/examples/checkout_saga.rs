//! A checkout saga as an orchestration: reserve stock, charge the card,
//! wait for the payment provider's `payment_confirmed` signal (or time
//! out), ship. A step that fails for good runs the completed steps'
//! compensations newest first: refund, then release the stock.
//!
//! Runs on the embedded default (a temporary SQLite file):
//!
//! ```text
//! cargo run -p drover --example checkout_saga
//! ```
//!
//! Two orders go through: one is confirmed and ships; the other's shipping
//! fails for good, so its card is refunded and its stock released.

#![allow(clippy::print_stdout, clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover::orchestration::{
    Next, OrchestrationStatus, Start, StepContext, StepError, Workflow, WorkflowStrategy, Workflows,
};
use drover::store::Store;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::worker::WorkerSettings;
use drover::{Queue, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The saga's typed state.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checkout {
    order: String,
    sku: String,
    cents: u64,
    reservation: Option<String>,
    charge: Option<String>,
}

/// Stands in for the stock service, the card processor and the carrier.
/// Each effect is keyed on the step's (orchestration, version): a step that
/// runs twice (a crash between its effect and its transition) applies it
/// once, as a real service would with an idempotency key.
#[derive(Default)]
struct World {
    log: Mutex<Vec<String>>,
}

impl World {
    fn act(&self, cx: &StepContext, what: String) -> String {
        let key = format!("{}:{}:{}", cx.orchestration_id(), cx.step(), cx.version());
        let mut log = self.log.lock().unwrap();
        if !log.iter().any(|l| l.starts_with(&key)) {
            log.push(format!("{key} {what}"));
            println!("  {what}");
        }
        key
    }
}

fn saga(world: Arc<World>) -> Workflow<Checkout> {
    let strategy = WorkflowStrategy {
        compensation: "refund the charge, then release the stock (newest first)",
        resume: "payment_confirmed wakes it; a 30 s timeout fails it into compensation",
    };
    let w = world.clone();
    let reserve = move |cx: StepContext, mut s: Checkout| {
        let w = w.clone();
        async move {
            s.reservation = Some(w.act(&cx, format!("reserved 1 x {} for {}", s.sku, s.order)));
            Ok(Next::step("charge_card", s))
        }
    };
    let w = world.clone();
    let charge = move |cx: StepContext, mut s: Checkout| {
        let w = w.clone();
        async move {
            s.charge = Some(w.act(&cx, format!("charged {} cents for {}", s.cents, s.order)));
            Ok(Next::WaitSignal {
                name: "payment_confirmed",
                step: "ship",
                timeout: Duration::from_secs(30),
                on_timeout: "payment_timed_out",
                state: s,
            })
        }
    };
    let w = world.clone();
    let ship = move |cx: StepContext, s: Checkout| {
        let w = w.clone();
        async move {
            if s.order.ends_with("-lost") {
                return Err(StepError::fatal("the carrier refused the parcel"));
            }
            w.act(&cx, format!("shipped {}", s.order));
            Ok(Next::complete(serde_json::json!({"shipped": s.order}), s))
        }
    };
    let timed_out = |_cx: StepContext, _s: Checkout| async move {
        Err::<Next<Checkout>, _>(StepError::fatal("payment was never confirmed"))
    };
    let w = world.clone();
    let release = move |cx: StepContext, s: Checkout| {
        let w = w.clone();
        async move {
            w.act(&cx, format!("released the stock of {}", s.order));
            Ok(())
        }
    };
    let w = world;
    let refund = move |cx: StepContext, s: Checkout| {
        let w = w.clone();
        async move {
            w.act(&cx, format!("refunded {} cents to {}", s.cents, s.order));
            Ok(())
        }
    };
    Workflow::new("checkout", strategy)
        .step("reserve_stock", reserve)
        .step("charge_card", charge)
        .step("ship", ship)
        .step("payment_timed_out", timed_out)
        .compensate("reserve_stock", release)
        .compensate("charge_card", refund)
}

async fn wait_final(queue: &Queue, id: Uuid) -> drover::orchestration::Orchestration {
    loop {
        let r = queue.orchestration(Uuid::nil(), id).await.unwrap();
        if r.status.is_final() || r.status == OrchestrationStatus::Parked {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let path = std::env::temp_dir().join(format!("drover-checkout-{}.db", Uuid::now_v7()));
    let store = SqliteStore::open(
        path.to_str().unwrap_or("drover-checkout.db"),
        SqliteOptions::default(),
    )
    .await?;
    store.migrate().await?;
    let queue = Queue::new(Arc::new(store));
    let world = Arc::new(World::default());
    let worker = Worker::builder(queue.clone())
        .settings(WorkerSettings {
            metrics_addr: None,
            sweep_interval: Duration::from_millis(500),
            ..WorkerSettings::default()
        })
        .workflows(Workflows::new().with(saga(world.clone())))
        .build()?
        .start()
        .await?;

    for order in ["order-1", "order-2-lost"] {
        println!("{order}:");
        let state = Checkout {
            order: order.into(),
            sku: "mug".into(),
            cents: 1299,
            reservation: None,
            charge: None,
        };
        // Keyed on the order: a retried checkout meets its own saga.
        let start = Start::of(&saga(world.clone()), &state)?.key(format!("checkout:{order}"));
        let id = queue.start(&start).await?.record.id;
        let parked = wait_final(&queue, id).await;
        println!("  parked, waiting for {:?}", parked.waiting_for);
        // The payment provider's webhook, keyed so a resent webhook is harmless.
        queue
            .signal(
                &drover::queue::Principal::system(),
                Uuid::nil(),
                id,
                "payment_confirmed",
                serde_json::json!({"psp": "ok"}),
                Some("psp-evt-1"),
            )
            .await?;
        let done = wait_final(&queue, id).await;
        println!(
            "  ended {} (result {:?}, error {:?})",
            done.status, done.result, done.error
        );
        for h in &done.history {
            println!("    {:<18} attempt {} {}", h.step, h.attempt, h.outcome);
        }
    }
    worker.shutdown().await;
    let _ = std::fs::remove_file(&path);
    Ok(())
}
