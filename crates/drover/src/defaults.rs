//! The roles every worker runs by default (the scheduler with the heartbeat
//! schedule, the outbox relay, the paced vacuum, the sweep), assembled: the
//! one place that knows them all by name, above the worker and every role.
//!
//! [`Worker::builder`] is defined here: a [`WorkerBuilder`] with this
//! module's assembly set and every [`register!`](crate::register)ed setup
//! of the binary applied at build (unless the builder opts out). At [`WorkerBuilder::build`] the assembly takes
//! each role's knobs (as its own builder calls, in its own module, left
//! them) and turns the roles that are on into [`Service`]s from the
//! [`WorkerSettings`].
//!
//! Invariants: the roles are declared in a fixed order (scheduler, relay,
//! vacuum, sweep: `drover handlers` lists them so) and start in the order
//! sweep, scheduler, relay, vacuum; the relay is built before the sweep,
//! because the sweep runs the relay's step; a role turned off by a
//! `without_*` call stays off whatever the settings say; the vacuum is
//! declared wherever it is on but started only on PostgreSQL.

use crate::error::Result;
use crate::maintenance::{SweepConfig, SweepKnobs, Sweeper, sweep_role};
use crate::outbox::{RelayKnobs, relay_role, relay_service};
use crate::periodic::{ScheduleKnobs, apply_registrations, scheduler_service, worker_scheduler};
use crate::queue::Queue;
use crate::store::Backend;
use crate::vacuum::{VacuumConfig, VacuumKnobs, Vacuumer, vacuum_role};
use crate::worker::{Knobs, Registry, Service, Worker, WorkerBuilder, WorkerSettings};

impl Worker {
    /// Starts building a worker over `queue`, with the default roles (the
    /// scheduler and its heartbeat, the outbox relay, the paced vacuum, the
    /// sweep) on as the settings say.
    /// Every [`register!`](crate::register)ed setup of the binary is applied
    /// at [`build`](WorkerBuilder::build), unless
    /// [`without_registered`](WorkerBuilder::without_registered) says not to.
    pub fn builder(queue: Queue) -> WorkerBuilder {
        WorkerBuilder::new(queue)
            .with_assembly(assemble)
            .with_registered(apply_registrations)
    }
}

/// Builds the default roles that are on, declares each in `registry` (the
/// heartbeat's handler too), and returns their services in start order:
/// sweep, scheduler, relay, vacuum.
///
/// # Errors
/// A schedule that does not compile, a role's settings that do not check,
/// a role declaration the registry refuses.
fn assemble(
    knobs: &mut Knobs,
    queue: &Queue,
    settings: &WorkerSettings,
    registry: &mut Registry,
) -> Result<Vec<Box<dyn Service>>> {
    let ScheduleKnobs { schedules } = knobs.take();
    let RelayKnobs { config: relay, .. } = knobs.take();
    let VacuumKnobs {
        config: vacuum,
        on: vacuum_on,
    } = knobs.take();
    let SweepKnobs {
        on: sweep_on,
        mut steps,
    } = knobs.take();
    let scheduler = worker_scheduler(queue, schedules, settings, registry)?;
    let sweeper = Sweeper::new(
        queue.clone(),
        SweepConfig {
            retention: settings.item_retention,
            ..SweepConfig::every(settings.sweep_interval)
        },
    )?;
    let relay = match relay {
        Some(config) => {
            let (relay, step) = relay_service(queue, config)?;
            registry.add_role(relay_role())?;
            steps.push(step);
            Some(relay)
        }
        None => None,
    };
    // Declared wherever it is on, so `drover handlers` (over memory) lists
    // it; started only where there is garbage: PostgreSQL.
    let vacuum = if vacuum_on && (settings.vacuum || vacuum.is_some()) {
        let config = vacuum.unwrap_or_else(|| VacuumConfig {
            dead_threshold: settings.vacuum_threshold,
            ..VacuumConfig::default()
        });
        let vacuumer = Vacuumer::new(queue.clone(), config)?;
        registry.add_role(vacuum_role())?;
        (queue.store().backend() == Backend::Postgres).then_some(vacuumer)
    } else {
        None
    };
    if sweep_on {
        let names: Vec<String> = steps.iter().map(|s| s.name().to_owned()).collect();
        registry.add_role(sweep_role(&names))?;
    }
    let sweeper = steps.into_iter().fold(sweeper, |s, step| s.with_step(step));
    let mut services: Vec<Box<dyn Service>> = Vec::new();
    if sweep_on {
        services.push(Box::new(sweeper));
    }
    if let Some(s) = scheduler {
        services.push(scheduler_service(s));
    }
    services.extend(relay);
    if let Some(v) = vacuum {
        services.push(Box::new(v));
    }
    Ok(services)
}
