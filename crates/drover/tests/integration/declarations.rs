//! The declarations DESIGN §2 and §9 ask of every handler: a complete
//! strategy (idempotency, retry, checkpoint/replay, recovery) and a kind
//! permission that covers what the handler's own calls require.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use drover::queue::{JobContext, Kind, Queue};
use drover::worker::{Done, Handler, Outcome, RoleInfo, Strategy, Worker};
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

// Every kind and role `drover handlers --json` lists declares the four
// strategies: crates/drover-cli/tests/integration/worker_cli.rs
// (`handlers_json_lists_every_kind_and_role_with_four_strategies`) reads
// the real binary's output; the refusals behind it are tested here.

#[test]
fn a_role_missing_one_of_the_four_strategies_is_refused_naming_both() {
    let three = RoleInfo {
        role: "exporter".into(),
        name: "nightly".into(),
        strategies: vec![
            ("idempotency".into(), "keyed by the day".into()),
            ("retry".into(), "next run".into()),
            ("checkpoint".into(), "the last day exported".into()),
            ("format".into(), "csv".into()),
        ],
    };
    let e = Worker::builder(Queue::memory())
        .builtins()
        .role(three.clone())
        .build()
        .unwrap_err();
    assert!(matches!(e, drover::Error::Config(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("exporter nightly"), "names the role: {msg}");
    assert!(msg.contains("recovery"), "names the strategy: {msg}");

    let four = three.with("recovery", "rerun the day");
    let w = Worker::builder(Queue::memory())
        .builtins()
        .role(four)
        .build()
        .expect("all four declared");
    let r = w
        .registry()
        .roles()
        .iter()
        .find(|r| r.role == "exporter")
        .expect("listed");
    assert_eq!(r.strategy("format"), Some("csv"), "its own kept");
}

#[test]
fn a_role_declaring_a_strategy_twice_or_blank_is_refused() {
    let twice = RoleInfo::new("exporter", "nightly", FULL).with("retry", "again");
    let e = Worker::builder(Queue::memory())
        .builtins()
        .role(twice)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("retry strategy twice"), "{e}");
    let blank = RoleInfo::new("exporter", "nightly", FULL).with("format", " ");
    let e = Worker::builder(Queue::memory())
        .builtins()
        .role(blank)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("no format strategy"), "{e}");
}

#[test]
fn the_default_worker_lists_its_relay_scheduler_sweep_and_vacuum_roles() {
    let w = Worker::builder(Queue::memory())
        .builtins()
        .build()
        .expect("builds");
    let roles: Vec<&str> = w
        .registry()
        .roles()
        .iter()
        .map(|r| r.role.as_str())
        .collect();
    for want in ["outbox relay", "scheduler", "sweep", "paced vacuum"] {
        assert!(roles.contains(&want), "{want} missing from {roles:?}");
    }
    let json = serde_json::to_value(w.registry().roles()).expect("serializes");
    let sched = json
        .as_array()
        .and_then(|a| a.iter().find(|r| r["role"] == "scheduler"))
        .expect("the scheduler's row");
    assert!(
        sched["strategies"]["schedules"]
            .as_str()
            .unwrap_or("")
            .contains("drover.heartbeat"),
        "{sched}"
    );
}
