//! Registrations that reach the service's state: `register!(state: f)`
//! hands `f` the value given with `WorkerBuilder::state`, so a module's
//! handler can hold the service's pool; `WorkerBuilder::with_state` does the
//! same for a setup written at the call site. In its own test binary, so
//! the registration reaches no other test's worker.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use drover::Queue;
use drover::queue::{JobContext, Kind};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker, WorkerBuilder, WorkerSettings};
use tokio::sync::mpsc;

/// The service's state: here a channel standing for its pool, so a test
/// sees the handler used it.
#[derive(Clone)]
struct Db(mpsc::UnboundedSender<String>);

mod reports {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    pub struct Report {
        pub day: String,
    }
    impl Kind for Report {
        const NAME: &'static str = "report";
    }

    pub struct Reporter {
        pub db: Db,
    }
    impl Handler for Reporter {
        type Job = Report;
        const STRATEGY: Strategy = Strategy {
            idempotency: "one report row per day",
            retry: "default",
            recovery: "re-run",
            checkpoint: "none: one short call, a rerun starts over",
        };
        async fn handle(&self, _cx: &JobContext, job: Report) -> Outcome {
            self.db
                .0
                .send(job.day)
                .map_err(drover::worker::JobError::retry)?;
            Ok(Done::Completed)
        }
    }

    fn setup(b: WorkerBuilder, db: &Db) -> WorkerBuilder {
        b.handler(Reporter { db: db.clone() })
    }

    drover::register!(state: setup);
}

fn quiet() -> WorkerSettings {
    WorkerSettings {
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

#[tokio::test]
async fn a_registered_handler_runs_with_the_state_given_to_the_builder() {
    let queue = Queue::memory();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(queue.clone())
        .settings(quiet())
        .state(Db(tx))
        .build()
        .expect("build");
    assert!(worker.registry().kinds().contains(&"report".to_owned()));
    queue
        .enqueue(reports::Report {
            day: "2026-05-01".into(),
        })
        .await
        .expect("enqueue");
    let running = worker.start().await.expect("start");
    assert_eq!(rx.recv().await.as_deref(), Some("2026-05-01"));
    running.shutdown().await;
}

#[test]
fn a_worker_without_the_state_is_refused_naming_its_type() {
    let err = Worker::builder(Queue::memory())
        .settings(quiet())
        .build()
        .expect_err("no Db given");
    let msg = err.to_string();
    assert!(msg.contains("register_state::Db"), "{msg}");
    assert!(msg.contains("WorkerBuilder::state"), "{msg}");
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Ping {}
impl Kind for Ping {
    const NAME: &'static str = "ping";
}

struct Pinger;
impl Handler for Pinger {
    type Job = Ping;
    const STRATEGY: Strategy = Strategy {
        idempotency: "harmless",
        retry: "default",
        recovery: "re-run",
        checkpoint: "none",
    };
    async fn handle(&self, _cx: &JobContext, _job: Ping) -> Outcome {
        Ok(Done::Completed)
    }
}

/// A value of the service's other than the registration's.
struct Greeting(String);

#[test]
fn with_state_runs_at_build_whichever_call_came_first() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    // The setup before the state it needs, and a later `state` of the same
    // type replacing the first.
    let b = Worker::builder(Queue::memory())
        .settings(quiet())
        .with_state(move |b: WorkerBuilder, g: &Greeting| {
            log.lock().unwrap().push(g.0.clone());
            b.handler(Pinger)
        })
        .state(Greeting("first".into()))
        .state(Db(tx))
        .state(Greeting("hello".into()));
    assert_eq!(
        b.state_of::<Greeting>().map(|g| g.0.as_str()),
        Some("hello")
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing runs before build");
    let worker = b.build().expect("build");
    assert_eq!(*seen.lock().unwrap(), vec!["hello".to_owned()]);
    let kinds = worker.registry().kinds();
    assert!(kinds.contains(&"ping".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"report".to_owned()), "{kinds:?}");
}
