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
