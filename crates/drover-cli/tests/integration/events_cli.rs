//! `drover events tail`, `drover projector list|status|rebuild` and the
//! projector's strategies in `drover handlers`, in process over an
//! in-memory queue, with a projector run the way the worker runs it.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use clap::Parser;
use drover::Queue;
use drover::events::{Event, NewEvent};
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use serde_json::json;
use uuid::Uuid;

#[derive(Clone, Default)]
struct Counter(Arc<Mutex<Vec<i64>>>);

#[async_trait]
impl Projector for Counter {
    fn name(&self) -> &str {
        "order_counts"
    }
    fn topics(&self) -> Vec<String> {
        vec!["order_placed".into()]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "counts keyed by position: a replay rewrites the same entries",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the store's checkpoint; a replay rewrites the same entries",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset clears the counts; the log is replayed",
            lag: "counts trail the log by the lag gauge",
        }
    }
    async fn apply(&self, e: &Event, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        self.0.lock().unwrap().push(e.position);
        Ok(())
    }
    async fn reset(&self, _tenant: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        self.0.lock().unwrap().clear();
        Ok(())
    }
}

fn drover(queue: &Queue, args: &[&str]) -> (i32, String, String) {
    let cli =
        drover_cli::Cli::try_parse_from(std::iter::once("drover").chain(args.iter().copied()))
            .expect("parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = {
        let mut cx = drover_cli::Context::with_queue(queue.clone(), &mut out, &mut err)
            .with_worker_setup(|b| b.projector(Counter::default()));
        let rt = tokio::runtime::Handle::current();
        match tokio::task::block_in_place(|| {
            rt.block_on(drover_cli::execute(&cli.command, &mut cx))
        }) {
            Ok(()) => 0,
            Err(e) => {
                writeln!(cx.err, "error: {e}").unwrap();
                i32::from(e.exit_code())
            }
        }
    };
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_status_rebuild_list_and_handlers() {
    let queue = Queue::memory();
    let store = queue.store().clone();
    let tenant = Uuid::nil();
    let events: Vec<NewEvent> = (0..5)
        .map(|i| {
            NewEvent::new(
                if i % 2 == 0 {
                    "order_placed"
                } else {
                    "order_paid"
                },
                json!({ "i": i }),
            )
        })
        .collect();
    store.event_append_many(&events).await.unwrap();

    let (code, out, err) = drover(
        &queue,
        &["events", "tail", "--from", "0", "--limit", "3", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|v| v["position"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let (code, out, _) = drover(
        &queue,
        &[
            "events",
            "tail",
            "--topic",
            "order_paid",
            "--from",
            "0",
            "--limit",
            "2",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2);
    assert!(out.lines().all(|l| l.contains("order_paid")), "{out}");
    let (code, _, err) = drover(&queue, &["events", "tail", "--topic", "Bad Topic"]);
    assert_eq!(code, 2, "{err}");

    // Follows: appended after the tail started, printed by it.
    let tail = {
        let queue = queue.clone();
        tokio::spawn(async move { drover(&queue, &["events", "tail", "--limit", "6", "--json"]) })
    };
    store
        .event_append(&NewEvent::new("order_placed", json!({"late": true})))
        .await
        .unwrap();
    let (code, out, _) = tail.await.unwrap();
    assert_eq!(code, 0);
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["position"], 6);

    let counter = Counter::default();
    let runner = ProjectorRunner::new(
        store.clone(),
        Arc::new(counter.clone()),
        ProjectorConfig::default(),
    )
    .unwrap();
    runner.run_once().await.unwrap();
    assert_eq!(*counter.0.lock().unwrap(), vec![1, 3, 5, 6]);

    let (code, out, err) = drover(&queue, &["projector", "status", "order_counts", "--json"]);
    assert_eq!(code, 0, "{err}");
    let st: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(st[0]["position"], 6);
    assert_eq!(st[0]["behind_events"], 0);

    let (code, out, _) = drover(&queue, &["projector", "list", "--json"]);
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(list[0]["name"], "order_counts");
    assert_eq!(list[0]["registered"], true);

    let (code, out, _) = drover(
        &queue,
        &[
            "projector",
            "rebuild",
            "order_counts",
            "--tenant",
            &tenant.to_string(),
        ],
    );
    assert_eq!(code, 0);
    assert!(out.contains("requested for 1 tenant"), "{out}");
    let (_, out, _) = drover(&queue, &["projector", "status", "order_counts"]);
    assert!(out.contains("requested"), "{out}");
    let r = runner.run_once().await.unwrap();
    assert_eq!(r.rebuilt, 1);
    assert_eq!(
        *counter.0.lock().unwrap(),
        vec![1, 3, 5, 6],
        "reset, then replayed"
    );

    let (code, out, _) = drover(&queue, &["handlers"]);
    assert_eq!(code, 0);
    assert!(out.contains("order_counts"), "{out}");
    assert!(out.contains("counts keyed by position"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projector_with_a_blank_strategy_is_refused() {
    struct Blank;
    #[async_trait]
    impl Projector for Blank {
        fn name(&self) -> &str {
            "blank"
        }
        fn topics(&self) -> Vec<String> {
            vec![]
        }
        fn strategy(&self) -> ProjectorStrategy {
            ProjectorStrategy {
                idempotency: "x",
                retry: "x",
                checkpoint: "x",
                recovery: "x",
                rebuild: " ",
                lag: "x",
            }
        }
        async fn apply(&self, _e: &Event, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
            Ok(())
        }
        async fn reset(&self, _t: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
            Ok(())
        }
    }
    let err = drover::Worker::builder(Queue::memory())
        .projector(Blank)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no rebuild strategy"), "{err}");
}
