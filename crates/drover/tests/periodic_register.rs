//! Registration with no shared list: a `drover::register!` in any module of
//! the binary reaches every worker builder. In its own test binary, so the
//! registration reaches no other test's worker.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use drover::Queue;
use drover::periodic::Schedule;
use drover::queue::{JobContext, Kind};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};

mod reports {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    pub struct Report {}
    impl Kind for Report {
        const NAME: &'static str = "report";
    }

    pub struct Reporter;
    impl Handler for Reporter {
        type Job = Report;
        const STRATEGY: Strategy = Strategy {
            idempotency: "one item per tick",
            retry: "default",
            recovery: "re-run",
            checkpoint: "none: one short call, a rerun starts over",
        };
        async fn handle(&self, _cx: &JobContext, _job: Report) -> Outcome {
            Ok(Done::Completed)
        }
    }

    fn setup(b: drover::worker::WorkerBuilder) -> drover::worker::WorkerBuilder {
        b.handler(Reporter)
            .schedule(Schedule::new("report", "0 * * * *", Report {}).zone("Europe/Berlin"))
    }

    drover::register!(setup);
}

#[test]
fn a_registered_module_adds_its_handler_and_schedule_to_every_worker() {
    let worker = Worker::builder(Queue::memory()).build().expect("build");
    assert!(worker.registry().kinds().contains(&"report".to_owned()));
    let names: Vec<&str> = worker
        .scheduler()
        .expect("a scheduler")
        .schedules()
        .iter()
        .map(|s| s.name())
        .collect();
    assert!(names.contains(&"report"), "{names:?}");
    assert!(
        names.contains(&"drover.heartbeat"),
        "the heartbeat too: {names:?}"
    );
}

#[test]
fn the_heartbeat_setting_turns_it_off() {
    let worker = Worker::builder(Queue::memory())
        .settings(drover::worker::WorkerSettings {
            heartbeat_cron: None,
            ..Default::default()
        })
        .build()
        .expect("build");
    let names: Vec<&str> = worker
        .scheduler()
        .expect("the registered schedule remains")
        .schedules()
        .iter()
        .map(|s| s.name())
        .collect();
    assert_eq!(names, vec!["report"]);
}

/// Issue 31, point 11: a builder opts out of the binary's registrations
/// (a test's worker that wants only its own handlers), whenever the call
/// comes.
#[test]
fn without_registered_leaves_the_registrations_out() {
    let worker = Worker::builder(Queue::memory())
        .without_registered()
        .handler(Own)
        .build()
        .expect("build");
    assert_eq!(worker.registry().kinds(), ["drover.heartbeat", "own"]);
    let names: Vec<&str> = worker
        .scheduler()
        .expect("the heartbeat's")
        .schedules()
        .iter()
        .map(|s| s.name())
        .collect();
    assert_eq!(names, ["drover.heartbeat"]);
    // Without its own work, the registered handler no longer makes one.
    let e = Worker::builder(Queue::memory())
        .without_registered()
        .build()
        .expect_err("nothing to do");
    assert!(e.to_string().contains("nothing to do"), "{e}");
}

#[derive(serde::Serialize, serde::Deserialize)]
struct OwnJob {}
impl Kind for OwnJob {
    const NAME: &'static str = "own";
}

struct Own;
impl Handler for Own {
    type Job = OwnJob;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: no side effects",
        retry: "default",
        recovery: "re-run",
        checkpoint: "none",
    };
    async fn handle(&self, _cx: &JobContext, _job: OwnJob) -> Outcome {
        Ok(Done::Completed)
    }
}
