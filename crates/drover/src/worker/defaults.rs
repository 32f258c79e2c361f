//! The roles every worker runs by default (the scheduler with the
//! heartbeat schedule, the outbox relay, the paced vacuum, the sweep): their
//! knobs as the builder collects them, and the one place that turns them
//! into [`Service`]s from the [`WorkerSettings`].
//!
//! Invariants: the roles are declared in a fixed order (scheduler, relay,
//! vacuum, sweep: `drover handlers` lists them so); the relay is built
//! before the sweep, because the sweep runs the relay's step; a role turned
//! off by a `without_*` call stays off whatever the settings say.

use super::{Registry, Service, WorkerSettings};
use crate::error::Result;
use crate::maintenance::{SweepConfig, SweepStep, Sweeper};
use crate::queue::Queue;

/// The default roles' knobs, as the builder's calls left them.
pub(crate) struct Defaults {
    /// False after `without_sweep`.
    pub(crate) sweep: bool,
    /// Host steps added to the sweep.
    pub(crate) steps: Vec<Box<dyn SweepStep>>,
    /// The schedules of this worker's scheduler (the heartbeat's is added
    /// from the settings).
    pub(crate) schedules: Vec<crate::periodic::Schedule>,
    /// The relay's settings; `None` after `without_relay`.
    pub(crate) relay: Option<crate::outbox::RelayConfig>,
    /// True once `relay` was called: the relay is then work of its own (a
    /// relay-only worker needs no handler), not only the default every
    /// worker runs.
    pub(crate) relay_asked: bool,
    /// The paced vacuum's settings when set explicitly (else the defaults
    /// with the settings' threshold, when the settings turn it on).
    pub(crate) vacuum: Option<crate::vacuum::VacuumConfig>,
    /// False after `without_vacuum`.
    pub(crate) vacuum_on: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            sweep: true,
            steps: Vec::new(),
            schedules: Vec::new(),
            relay: Some(crate::outbox::RelayConfig::default()),
            relay_asked: false,
            vacuum: None,
            vacuum_on: true,
        }
    }
}

impl Defaults {
    /// True when a default role was asked for as work of its own: a
    /// schedule, or the relay called explicitly.
    pub(crate) fn is_work(&self) -> bool {
        !self.schedules.is_empty() || (self.relay_asked && self.relay.is_some())
    }

    /// Builds the default roles that are on, declares each in `registry`
    /// (the heartbeat's handler too), and returns their services in start
    /// order: sweep, scheduler, relay, vacuum.
    ///
    /// # Errors
    /// A schedule that does not compile, a role's settings that do not
    /// check, a role declaration the registry refuses.
    pub(crate) fn assemble(
        mut self,
        queue: &Queue,
        settings: &WorkerSettings,
        registry: &mut Registry,
    ) -> Result<Vec<Box<dyn Service>>> {
        let scheduler =
            crate::periodic::worker_scheduler(queue, self.schedules, settings, registry)?;
        let sweeper = Sweeper::new(
            queue.clone(),
            SweepConfig {
                retention: settings.item_retention,
                ..SweepConfig::every(settings.sweep_interval)
            },
        )?;
        let relay = match self.relay.take() {
            Some(config) => {
                let (relay, step) = crate::outbox::relay_service(queue, config)?;
                registry.add_role(crate::outbox::relay_role())?;
                self.steps.push(step);
                Some(relay)
            }
            None => None,
        };
        // Declared wherever it is on, so `drover handlers` (over memory)
        // lists it; started only where there is garbage: PostgreSQL.
        let vacuum = if self.vacuum_on && (settings.vacuum || self.vacuum.is_some()) {
            let config = self.vacuum.unwrap_or_else(|| crate::vacuum::VacuumConfig {
                dead_threshold: settings.vacuum_threshold,
                ..crate::vacuum::VacuumConfig::default()
            });
            let vacuumer = crate::vacuum::Vacuumer::new(queue.clone(), config)?;
            registry.add_role(crate::vacuum::vacuum_role())?;
            (queue.store().backend() == crate::store::Backend::Postgres).then_some(vacuumer)
        } else {
            None
        };
        if self.sweep {
            let steps: Vec<String> = self.steps.iter().map(|s| s.name().to_owned()).collect();
            registry.add_role(super::roles::sweep_role(&steps))?;
        }
        let sweeper = self
            .steps
            .into_iter()
            .fold(sweeper, |s, step| s.with_step(step));
        let mut services: Vec<Box<dyn Service>> = Vec::new();
        if self.sweep {
            services.push(Box::new(sweeper));
        }
        if let Some(s) = scheduler {
            services.push(crate::periodic::scheduler_service(s));
        }
        services.extend(relay);
        if let Some(v) = vacuum {
            services.push(Box::new(v));
        }
        Ok(services)
    }
}
