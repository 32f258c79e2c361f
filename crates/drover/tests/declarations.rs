//! The declarations DESIGN §2 and §9 ask of every handler: a complete
//! strategy (idempotency, retry, checkpoint/replay, recovery) and a kind
//! permission that covers what the handler's own calls require.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use drover::queue::{JobContext, Kind, Queue};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Refund {
    cents: u64,
}

impl Kind for Refund {
    const NAME: &'static str = "billing.refund";
    // Anyone who may enqueue any kind may enqueue a refund: too little.
    const PERMISSION: &'static str = "drover.enqueue";
}

const FULL: Strategy = Strategy {
    idempotency: "the provider dedupes on the item id",
    retry: "default backoff, 5 attempts",
    checkpoint: "none: one call, a rerun starts over",
    recovery: "a crashed run is swept and run again (deduped)",
};

struct Refunder;

impl Handler for Refunder {
    type Job = Refund;
    const STRATEGY: Strategy = FULL;
    const REQUIRES: &'static [&'static str] = &["billing.refund"];
    async fn handle(&self, _cx: &JobContext, _job: Refund) -> Outcome {
        Ok(Done::Completed)
    }
}

#[test]
fn worker_refuses_a_handler_whose_requires_its_kind_permission_does_not_cover() {
    let e = Worker::builder(Queue::memory())
        .handler(Refunder)
        .build()
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("\"billing.refund\""), "names REQUIRES: {msg}");
    assert!(
        msg.contains("\"drover.enqueue\""),
        "names the permission: {msg}"
    );
    assert!(msg.contains("billing.refund"), "names the kind: {msg}");
}

#[derive(Debug, Serialize, Deserialize)]
struct CoveredRefund {
    cents: u64,
}

impl Kind for CoveredRefund {
    const NAME: &'static str = "billing.refund_covered";
    const PERMISSION: &'static str = "billing.*";
}

struct CoveredRefunder;

impl Handler for CoveredRefunder {
    type Job = CoveredRefund;
    const STRATEGY: Strategy = FULL;
    const REQUIRES: &'static [&'static str] = &["billing.refund", "billing.read"];
    async fn handle(&self, _cx: &JobContext, _job: CoveredRefund) -> Outcome {
        Ok(Done::Completed)
    }
}

#[test]
fn a_kind_permission_covering_every_requirement_starts_and_is_described() {
    let w = Worker::builder(Queue::memory())
        .settings(drover::worker::WorkerSettings {
            // Only this test's handler: the heartbeat job would add its own.
            heartbeat_cron: None,
            ..Default::default()
        })
        .handler(CoveredRefunder)
        .build()
        .expect("covered by the wildcard");
    let info = w.registry().describe();
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].permission, "billing.*");
    assert_eq!(info[0].requires, ["billing.refund", "billing.read"]);
    assert_eq!(info[0].checkpoint, "none: one call, a rerun starts over");
}

#[derive(Debug, Serialize, Deserialize)]
struct Plain {
    n: u32,
}

impl Kind for Plain {
    const NAME: &'static str = "test.plain";
}

struct NoCheckpoint;

impl Handler for NoCheckpoint {
    type Job = Plain;
    const STRATEGY: Strategy = Strategy {
        checkpoint: "  ",
        ..FULL
    };
    async fn handle(&self, _cx: &JobContext, _job: Plain) -> Outcome {
        Ok(Done::Completed)
    }
}

#[test]
fn a_blank_checkpoint_strategy_is_refused() {
    let e = Worker::builder(Queue::memory())
        .handler(NoCheckpoint)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("checkpoint"), "{e}");
}

#[test]
fn the_builtin_kinds_declare_all_four_strategies() {
    let w = Worker::builder(Queue::memory())
        .builtins()
        .build()
        .expect("builtins are complete");
    for h in w.registry().describe() {
        for (name, v) in [
            ("idempotency", &h.idempotency),
            ("retry", &h.retry),
            ("checkpoint", &h.checkpoint),
            ("recovery", &h.recovery),
        ] {
            assert!(!v.trim().is_empty(), "{} has no {name}", h.kind);
        }
    }
}
