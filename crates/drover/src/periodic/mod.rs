//! Periodic work: cron schedules declared in code that fire exactly once
//! per tick across the fleet.
//!
//! | part | owns |
//! |---|---|
//! | [`Schedule`] | a declaration: name, cron (seconds optional), IANA zone, item, misfire policy, jitter |
//! | `plan` | the pure tick arithmetic: due ticks, misfire policies, DST (via croner) |
//! | [`ScheduleStore`] | the state rows: the last tick enqueued per schedule |
//! | [`Scheduler`] | the service each worker runs beside its claim loop |
//! | [`HeartbeatHandler`] | the built-in `drover.heartbeat` job |
//! | [`Registration`] | registration without a shared list ([`register!`](crate::register)) |
//!
//! Invariants: ticks are computed from the database clock; each tick's
//! item is keyed `periodic:<name>:<tick as RFC 3339 UTC>` and inserted in
//! the transaction that moves the schedule's row past the tick, so N
//! workers produce one item per tick even when their own clocks disagree;
//! a restart of every worker neither loses nor repeats a tick (the row is
//! durable; ticks missed meanwhile follow the [`MisfirePolicy`]).
//!
//! Declaring a schedule is one module; nothing else is edited:
//!
//! ```
//! use drover::periodic::Schedule;
//! use drover::queue::{JobContext, Kind};
//! use drover::worker::{Done, Handler, Outcome, Strategy, WorkerBuilder};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Cleanup {}
//! impl Kind for Cleanup { const NAME: &'static str = "cleanup"; }
//!
//! struct Cleaner;
//! impl Handler for Cleaner {
//!     type Job = Cleanup;
//!     const STRATEGY: Strategy = Strategy {
//!         idempotency: "deleting what is already gone is harmless",
//!         retry: "default backoff",
//!         checkpoint: "none: one pass, a rerun starts over",
//!         recovery: "the next tick cleans up too",
//!     };
//!     async fn handle(&self, _cx: &JobContext, _job: Cleanup) -> Outcome { Ok(Done::Completed) }
//! }
//!
//! fn setup(b: WorkerBuilder) -> WorkerBuilder {
//!     b.handler(Cleaner).schedule(Schedule::new("cleanup", "0 */6 * * *", Cleanup {}))
//! }
//! drover::register!(setup);
//! ```

mod as_service;
mod heartbeat;
mod plan;
mod schedule;
mod scheduler;

pub use crate::store::schedule::{
    AdvanceOutcome, AdvanceParams, ScheduleDecl, ScheduleRow, ScheduleStore,
};
pub(crate) use as_service::{ScheduleKnobs, scheduler_service};
pub use heartbeat::{
    HEARTBEAT_CRON_DEFAULT, HEARTBEAT_NAME, Heartbeat, HeartbeatHandler, beats, heartbeat_schedule,
};
pub use plan::{MISSED_COUNT_CAP, Plan, plan};
pub use schedule::{
    Compiled, MAX_BACKFILL_DEFAULT, MAX_BACKFILL_LIMIT, MAX_NAME_LEN, MisfirePolicy, Schedule,
    ZONE_DEFAULT, tick_key,
};
pub use scheduler::*;

#[doc(hidden)]
pub use inventory as __inventory;

use crate::worker::WorkerBuilder;

/// A registration collected at link time: a function that adds handlers,
/// schedules or anything else to every [`WorkerBuilder`] the binary makes
/// (applied by [`Worker::builder`](crate::Worker::builder)). Submit one with
/// [`register!`](crate::register).
pub struct Registration {
    setup: fn(WorkerBuilder) -> WorkerBuilder,
}

impl Registration {
    /// A registration running `setup`.
    pub const fn new(setup: fn(WorkerBuilder) -> WorkerBuilder) -> Self {
        Registration { setup }
    }
}

inventory::collect!(Registration);

/// Applies every [`Registration`] linked into the binary.
pub(crate) fn apply_registrations(mut b: WorkerBuilder) -> WorkerBuilder {
    for r in inventory::iter::<Registration> {
        b = (r.setup)(b);
    }
    b
}

/// Registers a `fn(WorkerBuilder) -> WorkerBuilder` that every worker of
/// the binary applies: a module adds its handler and schedule without
/// editing a shared list. See [`periodic`](crate::periodic).
#[macro_export]
macro_rules! register {
    ($setup:expr) => {
        $crate::periodic::__inventory::submit! {
            $crate::periodic::Registration::new($setup)
        }
    };
}

/// The scheduler a worker runs: its declared schedules plus the heartbeat
/// (unless turned off, on the `heartbeat_lane` setting, the same on every
/// worker so none rewrites another's schedule row), whose handler is added
/// when the worker has none for it, and the scheduler's role row. `None`
/// when there is nothing to run.
pub(crate) fn worker_scheduler(
    queue: &crate::Queue,
    schedules: Vec<Schedule>,
    settings: &crate::worker::WorkerSettings,
    registry: &mut crate::worker::Registry,
) -> crate::Result<Option<std::sync::Arc<Scheduler>>> {
    let mut compiled = schedules
        .iter()
        .map(Schedule::compile)
        .collect::<crate::Result<Vec<_>>>()?;
    if let Some(cron) = &settings.heartbeat_cron {
        let lane = settings.heartbeat_lane.as_str();
        if !settings.lanes.iter().any(|l| l == lane) {
            // Legal (another worker drains it), but a fleet where none does
            // piles a beat a tick up in that lane: say so once, at start.
            tracing::warn!(
                heartbeat_lane = lane,
                lanes = ?settings.lanes,
                "this worker does not drain the heartbeat's lane; some worker must \
                 (DROVER_HEARTBEAT_LANE names it)"
            );
        }
        compiled.push(heartbeat_schedule(cron).compile()?.with_lane(lane));
        if !registry.kinds().iter().any(|k| k == HEARTBEAT_NAME) {
            registry.add(HeartbeatHandler)?;
        }
    }
    if compiled.is_empty() {
        return Ok(None);
    }
    let config = SchedulerConfig {
        interval: settings.scheduler_interval,
        ..SchedulerConfig::default()
    };
    registry.add_role(scheduler_role(&compiled))?;
    Ok(Some(std::sync::Arc::new(Scheduler::from_compiled(
        queue.clone(),
        compiled,
        config,
    )?)))
}
