//! Workers that run roles only: a worker that relays, or projects, builds
//! and runs without a handler (and claims nothing), and a worker with
//! nothing at all to do is refused with a message saying what to add.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use async_trait::async_trait;
use drover::events::{Event, NewEvent};
use drover::item::Status;
use drover::outbox::RelayConfig;
use drover::projector::{ProjectionTx, Projector, ProjectorStrategy};
use drover::queue::{Kind, Principal, Queue};

use drover::worker::{Worker, WorkerSettings};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use uuid::Uuid;

/// The whole test's ceiling: a hang fails it instead of blocking the run.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Serialize, Deserialize)]
struct Ping {
    n: u32,
}

impl Kind for Ping {
    const NAME: &'static str = "test.roles_only.ping";
}

/// No heartbeat (it would bring its own handler), no listener.
fn quiet() -> WorkerSettings {
    WorkerSettings {
        heartbeat_cron: None,
        metrics_addr: None,
        ..WorkerSettings::default()
    }
}

#[tokio::test]
async fn a_worker_with_only_a_relay_builds_relays_a_row_and_claims_nothing() {
    let q = Queue::memory();
    let worker = Worker::builder(q.clone())
        .settings(quiet())
        .relay(RelayConfig::default())
        .build()
        .expect("a relay is work enough: no dummy handler");
    assert!(worker.registry().is_empty(), "no handler was added");
    // Waiting before the worker starts: a claim loop would take it at once.
    let waiting = q.enqueue(Ping { n: 0 }).await.expect("enqueue").item.id;
    // Subscribed after that enqueue's wake-up and before the row is
    // written: the relay's insert wakes the item's lane, and that wake-up
    // is what the test waits for.
    let mut wake = q.store().wakeups().await.expect("wake-ups");
    let running = worker.start().await.expect("start");
    let row = q
        .outbox_work_row(&Principal::system(), &Ping { n: 1 })
        .expect("row");
    q.outbox_write(&Principal::system(), &row)
        .await
        .expect("outbox write");
    q.wake_outbox();
    tokio::time::timeout(LIMIT, async {
        loop {
            let w = wake.recv().await.expect("wake-up");
            if w.lane == Ping::LANE {
                return;
            }
        }
    })
    .await
    .expect("the relay inserted the item");
    running.shutdown().await;
    let item = q.get(Uuid::nil(), row.id).await.expect("the relayed item");
    assert_eq!(item.kind, Ping::NAME);
    // A claim with no kinds takes every kind: a worker without handlers
    // must never issue one (a claim moves the fencing token for good, even
    // once the unhandled item is released).
    for id in [row.id, waiting] {
        let item = q.get(Uuid::nil(), id).await.expect("item");
        assert_eq!(item.status, Status::Pending, "{item:?}");
        assert_eq!(item.claim_seq, 0, "claimed by nobody: {item:?}");
    }
}

/// Sends every event it applies to the test.
struct Forward(mpsc::UnboundedSender<i64>);

#[async_trait]
impl Projector for Forward {
    fn name(&self) -> &str {
        "roles_only"
    }
    fn topics(&self) -> Vec<String> {
        vec!["roles_only.seen".into()]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "a test double: forwards every call",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the runner's checkpoint per tenant",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset forgets nothing",
            lag: "none: the test reads each apply",
        }
    }
    async fn apply(&self, e: &Event, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let _ = self.0.send(e.position);
        Ok(())
    }
    async fn reset(&self, _tenant: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_worker_with_only_a_projector_builds_and_projects_an_event() {
    let q = Queue::memory();
    let (tx, mut applied) = mpsc::unbounded_channel();
    let worker = Worker::builder(q.clone())
        .settings(quiet())
        .without_relay()
        .projector(Forward(tx))
        .build()
        .expect("a projector is work enough: no dummy handler");
    assert!(worker.registry().is_empty(), "no handler was added");
    let running = worker.start().await.expect("start");
    let appended = q
        .store()
        .event_append_many(&[NewEvent::new("roles_only.seen", serde_json::json!({}))])
        .await
        .expect("append");
    let position = tokio::time::timeout(LIMIT, applied.recv())
        .await
        .expect("the projector ran")
        .expect("an applied event");
    assert_eq!(position, appended[0].position());
    running.shutdown().await;
}

#[test]
fn a_worker_with_nothing_to_do_is_refused_saying_what_to_add() {
    // The default relay, sweep and heartbeat are housekeeping: a builder
    // whose handlers were forgotten is still refused.
    let e = Worker::builder(Queue::memory()).build().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("nothing to do"), "{msg}");
    assert!(msg.contains("handler"), "{msg}");
    assert!(msg.contains(".relay("), "{msg}");
    let e = Worker::builder(Queue::memory())
        .relay(RelayConfig::default())
        .without_relay()
        .settings(quiet())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("nothing to do"), "{e}");
}
