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
pub use plan::{MISSED_COUNT_CAP, Plan, next_ticks_of, plan};
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
    setup: Setup,
}

/// What a registration runs.
enum Setup {
    /// `register!(f)`: applied when the builder is made.
    Plain(fn(WorkerBuilder) -> WorkerBuilder),
    /// `register!(state: f)`: applied at `build` with the state of its type.
    WithState {
        state: StateType,
        apply: fn(WorkerBuilder, &(dyn std::any::Any + Send + Sync)) -> WorkerBuilder,
    },
}

/// The type of state a `register!(state: f)` setup takes, found at compile
/// time from `f`'s signature.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct StateType {
    id: fn() -> std::any::TypeId,
    name: fn() -> &'static str,
}

impl StateType {
    /// The state type `setup` takes.
    pub const fn of_setup<T: Send + Sync + 'static>(
        _setup: fn(WorkerBuilder, &T) -> WorkerBuilder,
    ) -> Self {
        StateType {
            id: std::any::TypeId::of::<T>,
            name: std::any::type_name::<T>,
        }
    }
}

/// Runs `setup` with `state`, which the builder found by `T`'s type id.
#[doc(hidden)]
pub fn apply_with_state<T: Send + Sync + 'static>(
    b: WorkerBuilder,
    state: &(dyn std::any::Any + Send + Sync),
    setup: fn(WorkerBuilder, &T) -> WorkerBuilder,
) -> WorkerBuilder {
    match state.downcast_ref::<T>() {
        Some(s) => setup(b, s),
        // The builder looks the value up by `T`'s own type id.
        None => b,
    }
}

impl Registration {
    /// A registration running `setup` on every builder at `build`.
    pub const fn new(setup: fn(WorkerBuilder) -> WorkerBuilder) -> Self {
        Registration {
            setup: Setup::Plain(setup),
        }
    }

    /// A registration whose setup takes the service's state: run at
    /// [`build`](WorkerBuilder::build) with the value given to
    /// [`WorkerBuilder::state`]. Made by `register!(state: f)`.
    #[doc(hidden)]
    pub const fn with_state(
        state: StateType,
        apply: fn(WorkerBuilder, &(dyn std::any::Any + Send + Sync)) -> WorkerBuilder,
    ) -> Self {
        Registration {
            setup: Setup::WithState { state, apply },
        }
    }
}

inventory::collect!(Registration);

/// Applies every [`Registration`] linked into the binary (at `build`): the
/// plain ones now, the ones taking state as setups the builder runs next.
pub(crate) fn apply_registrations(mut b: WorkerBuilder) -> WorkerBuilder {
    for r in inventory::iter::<Registration> {
        b = match r.setup {
            Setup::Plain(setup) => setup(b),
            Setup::WithState { state, apply } => b.stateful_setup(crate::worker::StatefulSetup {
                type_id: (state.id)(),
                type_name: (state.name)(),
                apply: Box::new(apply),
            }),
        };
    }
    b
}

/// Registers a setup that every worker of the binary applies at
/// [`build`](crate::worker::WorkerBuilder::build): a module adds its
/// handler and schedule without editing a shared list. A builder that
/// should not get them (a test's) calls
/// [`without_registered`](crate::worker::WorkerBuilder::without_registered).
/// See [`periodic`](crate::periodic).
///
/// - `register!(f)`, `f: fn(WorkerBuilder) -> WorkerBuilder`.
/// - `register!(state: f)`, `f: fn(WorkerBuilder, &T) -> WorkerBuilder`:
///   applied at [`build`](WorkerBuilder::build) with the service's value of
///   type `T`, given with [`WorkerBuilder::state`] (a worker built without
///   one is refused, naming `T`). This is how a handler holds the service's
///   pool:
///
/// ```standalone_crate
/// use drover::queue::{JobContext, Kind, Queue};
/// use drover::worker::{Done, Handler, Outcome, Strategy, Worker, WorkerBuilder};
///
/// #[derive(Clone)]
/// struct Db(std::sync::Arc<String>); // the service's pool
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct NightlyReport {}
/// impl Kind for NightlyReport { const NAME: &'static str = "nightly_report"; }
///
/// struct Reporter { db: Db }
/// impl Handler for Reporter {
///     type Job = NightlyReport;
///     const STRATEGY: Strategy = Strategy {
///         idempotency: "the report row is keyed by its day",
///         retry: "default backoff",
///         checkpoint: "none: one query",
///         recovery: "a crashed run is swept and run again",
///     };
///     async fn handle(&self, _cx: &JobContext, _job: NightlyReport) -> Outcome {
///         let _pool = &self.db; // the service's own pool
///         Ok(Done::Completed)
///     }
/// }
///
/// fn reports(b: WorkerBuilder, db: &Db) -> WorkerBuilder {
///     b.handler(Reporter { db: db.clone() })
/// }
/// drover::register!(state: reports);
///
/// let db = Db(std::sync::Arc::new("postgres://…".into()));
/// let worker = Worker::builder(Queue::memory()).state(db).metrics_addr(None).build()?;
/// assert!(worker.registry().kinds().iter().any(|k| k == "nightly_report"));
/// # Ok::<(), drover::Error>(())
/// ```
#[macro_export]
macro_rules! register {
    (state: $setup:expr) => {
        $crate::periodic::__inventory::submit! {
            $crate::periodic::Registration::with_state(
                $crate::periodic::StateType::of_setup($setup),
                |b, state| $crate::periodic::apply_with_state(b, state, $setup),
            )
        }
    };
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
        // Whether some worker drains it is checked at build, with the
        // rest of the work this worker creates for itself.
        registry.writes_to(
            lane,
            "the heartbeat schedule (drover.heartbeat, on heartbeat_lane / \
             DROVER_HEARTBEAT_LANE; heartbeat_cron / DROVER_HEARTBEAT_CRON=off turns it off)"
                .to_owned(),
        );
        compiled.push(heartbeat_schedule(cron).compile()?.with_lane(lane));
        if !registry.kinds().iter().any(|k| k == HEARTBEAT_NAME) {
            registry.add(HeartbeatHandler)?;
        }
    }
    // A schedule whose kind this worker handles makes work for itself; one
    // it does not handle feeds other workers and is theirs to drain.
    let handled = registry.kinds();
    for s in &compiled {
        if s.name() != HEARTBEAT_NAME && handled.iter().any(|k| k == s.kind()) {
            registry.writes_to(s.lane(), format!("schedule {} (its lane)", s.name()));
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
