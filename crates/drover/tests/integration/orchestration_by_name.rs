//! Starting a workflow by name (`Start::new`), with where it begins, its
//! lane and its budget taken from the declaration the queue holds (a
//! worker's `workflows` call, or `Workflows::declare` in a process that only
//! starts); and unit tests of steps with `orchestration::testkit`, no worker
//! involved. The start resolves on the queue, before the store: the memory
//! backend shows it (the record written is the same on every backend).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::orchestration::testkit::{
    StepRun, run_compensation_twice, run_step, run_step_twice, step_context,
};
use drover::orchestration::{
    Next, OrchestrationStatus, Start, StepContext, StepError, StepResult, Workflow,
    WorkflowStrategy, Workflows,
};
use drover::queue::Queue;
use drover::worker::WorkerSettings;
use drover::{ErrorKind, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

const STRATEGY: WorkflowStrategy = WorkflowStrategy {
    compensation: "release the reservation",
    resume: "parked records resumed by the sweep or a signal",
};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Checkout {
    order: u64,
    reserved: bool,
}

/// The service's stock: reservations keyed by (orchestration, step,
/// version), so a rerun of a step reserves nothing new.
#[derive(Default)]
struct Stock {
    reserved: Mutex<HashMap<(Uuid, String, i64), u64>>,
    released: Mutex<Vec<u64>>,
}

async fn reserve(stock: Arc<Stock>, cx: StepContext, mut s: Checkout) -> StepResult<Checkout> {
    stock
        .reserved
        .lock()
        .unwrap()
        .entry((cx.orchestration_id(), cx.step().to_owned(), cx.version()))
        .or_insert(s.order);
    s.reserved = true;
    Ok(Next::step("confirm", s))
}

async fn confirm(cx: StepContext, s: Checkout) -> StepResult<Checkout> {
    match cx.signal() {
        Some(v) if v["paid"] == json!(false) => Err(StepError::fatal("payment refused")),
        _ => Ok(Next::complete(json!({ "order": s.order }), s)),
    }
}

fn checkout(stock: &Arc<Stock>) -> Workflow<Checkout> {
    let (a, b) = (stock.clone(), stock.clone());
    Workflow::new("checkout", STRATEGY)
        .max_attempts(2)
        .step("reserve", move |cx, s| reserve(a.clone(), cx, s))
        .step("confirm", confirm)
        .compensate("reserve", move |_cx, s: Checkout| {
            let b = b.clone();
            async move {
                b.released.lock().unwrap().push(s.order);
                Ok(())
            }
        })
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        poll_interval: Duration::from_millis(20),
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_by_name_runs_the_workflow_the_worker_declared() {
    let queue = Queue::memory();
    let stock = Arc::new(Stock::default());
    // The workflow value goes to the worker; the start names it.
    let worker = Worker::builder(queue.clone())
        .settings(settings())
        .workflows(Workflows::new().with(checkout(&stock)))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let start = Start::new(
        "checkout",
        &Checkout {
            order: 7,
            reserved: false,
        },
    )
    .unwrap()
    .key("checkout:7");
    let rec = queue.start(&start).await.expect("start").record;
    assert_eq!(
        (rec.step.as_str(), rec.lane.as_str(), rec.max_attempts),
        ("reserve", "default", 2),
        "the declared first step, lane and budget"
    );
    let end = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let r = queue.orchestration(Uuid::nil(), rec.id).await.unwrap();
        if r.status == OrchestrationStatus::Completed {
            break r;
        }
        assert!(Instant::now() < end, "never completed: {r:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    worker.shutdown().await;
    assert_eq!(done.result, Some(json!({ "order": 7 })));
    assert_eq!(stock.reserved.lock().unwrap().len(), 1);
    // A retried start with the key meets its own orchestration.
    let again = queue.start(&start).await.expect("again").record;
    assert_eq!(again.id, rec.id);
}

#[tokio::test]
async fn a_process_that_only_starts_declares_its_workflows() {
    let stock = Arc::new(Stock::default());
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    // A producer's own queue over the same store: no worker declared
    // anything on it.
    let producer = Queue::new(store);
    let start = Start::new("checkout", &Checkout::default()).unwrap();
    let err = producer.start(&start).await.expect_err("unknown here");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("Workflows::declare"), "{err}");

    Workflows::new()
        .with(checkout(&stock).lane("payments"))
        .declare(&producer);
    let rec = producer.start(&start).await.expect("declared").record;
    assert_eq!(
        (rec.step.as_str(), rec.lane.as_str()),
        ("reserve", "payments")
    );
}

#[test]
fn a_start_by_name_checks_the_name_like_a_kind() {
    let err = Start::new("Check Out", &Checkout::default()).expect_err("not a kind name");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(Start::new("", &Checkout::default()).is_err());
    assert!(Start::new("shop.checkout:v2", &Checkout::default()).is_ok());
}

#[tokio::test]
async fn a_declared_step_run_twice_reserves_once() {
    let stock = Arc::new(Stock::default());
    let w = checkout(&stock);
    let state = Checkout {
        order: 9,
        reserved: false,
    };
    let (first, second) = run_step_twice(&w, "reserve", &state).await.unwrap();
    let want = Next::step(
        "confirm",
        Checkout {
            order: 9,
            reserved: true,
        },
    );
    assert_eq!(first, Ok(want.clone()));
    assert_eq!(second, Ok(want));
    assert_eq!(stock.reserved.lock().unwrap().len(), 1, "one reservation");

    let (a, b) = run_compensation_twice(&w, "reserve", &state).await.unwrap();
    assert_eq!((a, b), (Ok(()), Ok(())));
    assert_eq!(*stock.released.lock().unwrap(), vec![9, 9]);

    let err = run_step_twice(&w, "ship", &state)
        .await
        .expect_err("no such step");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = run_compensation_twice(&w, "confirm", &state)
        .await
        .expect_err("no compensation of confirm");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_step_function_takes_a_context_built_by_the_testkit() {
    let cx = step_context("checkout", "confirm").unwrap();
    assert_eq!(
        (cx.kind(), cx.step(), cx.attempt()),
        ("checkout", "confirm", 1)
    );
    assert_eq!((cx.version(), cx.tenant()), (1, Uuid::nil()));
    assert!(cx.signal().is_none());
    let next = confirm(cx, Checkout::default()).await;
    assert!(matches!(next, Ok(Next::Complete { .. })));

    // Woken by a signal, on a later attempt, at a later version.
    let run = StepRun {
        version: 4,
        attempt: 2,
        signal: Some(json!({ "paid": false })),
        ..StepRun::default()
    };
    let cx = run.context("checkout", "confirm").unwrap();
    assert_eq!((cx.version(), cx.attempt()), (4, 2));
    assert_eq!(
        confirm(cx, Checkout::default()).await,
        Err(StepError::Fatal("payment refused".into()))
    );
    let w = checkout(&Arc::new(Stock::default()));
    let r = run_step(&w, "confirm", &Checkout::default(), &run)
        .await
        .unwrap();
    assert!(matches!(r, Err(StepError::Fatal(_))));
    assert!(
        StepRun {
            attempt: 0,
            ..StepRun::default()
        }
        .context("checkout", "confirm")
        .is_err()
    );
}
