//! The README's "Periodic jobs" example: a nightly report at 02:30 Berlin
//! time, registered from its own module with no shared list to edit.

#![allow(clippy::print_stdout, clippy::expect_used)]

use drover::periodic::{MisfirePolicy, Schedule};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use drover::{JobContext, Kind, Queue};

#[derive(serde::Serialize, serde::Deserialize)]
struct NightlyReport {}
impl Kind for NightlyReport {
    const NAME: &'static str = "report.nightly";
}

struct Reporter;
impl Handler for Reporter {
    type Job = NightlyReport;
    const STRATEGY: Strategy = Strategy {
        idempotency: "one item per tick",
        retry: "default backoff",
        recovery: "re-run",
        checkpoint: "none: one short call, a rerun starts over",
    };
    async fn handle(&self, _cx: &JobContext, _job: NightlyReport) -> Outcome {
        Ok(Done::Completed)
    }
}

drover::register!(|b| b.handler(Reporter).schedule(
    Schedule::new("nightly-report", "30 2 * * *", NightlyReport {})
        .zone("Europe/Berlin")
        .misfire(MisfirePolicy::Once),
));

#[tokio::main]
async fn main() -> drover::Result<()> {
    let queue = Queue::connect("sqlite::memory:").await?;
    queue.migrate().await?;
    // The registration above already added the handler and the schedule.
    let worker = Worker::builder(queue).build()?;
    let scheduler = worker.scheduler().expect("schedules declared");
    for s in scheduler.schedules() {
        println!(
            "{} {:?} in {}: next {:?}",
            s.name(),
            s.cron(),
            s.zone_name(),
            s.next_ticks(chrono::Utc::now(), 3)
        );
    }
    Ok(())
}
