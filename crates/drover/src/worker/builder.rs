//! [`WorkerBuilder`]: collects lanes, handlers, sweep steps, schedules and
//! knobs, and checks them all before a [`Worker`] exists.
//!
//! Invariants: the order of calls never matters (the base settings and
//! the explicit calls are kept apart and merged at [`WorkerBuilder::build`]);
//! a builder call that cannot be honoured is kept and reported by `build`,
//! never dropped; nothing runs or connects until
//! [`Worker::start`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Handler, Registry, RoleInfo, Worker, WorkerSettings};
use crate::error::{Error, Result};
use crate::maintenance::{SweepConfig, SweepStep, Sweeper};
use crate::queue::Queue;

/// Builds a [`Worker`]: one call per lane, handler and knob.
///
/// Order does not matter: [`settings`](WorkerBuilder::settings) sets the
/// base every knob starts from, and each explicit call (`lane`,
/// `capacity`, `lease`, `metrics_addr`) overrides its field of that base
/// whether it comes before or after. So
/// `.settings(WorkerSettings::from_env()?).lane("mail")` drains `mail`
/// only, and a later `.settings(..)` keeps the explicit calls made before.
pub struct WorkerBuilder {
    queue: Queue,
    base: WorkerSettings,
    lanes: Vec<String>,
    capacity: Option<usize>,
    lease: Option<Duration>,
    metrics_addr: Option<Option<SocketAddr>>,
    registry: Registry,
    errors: Vec<Error>,
    steps: Vec<Box<dyn SweepStep>>,
    sweep: bool,
    schedules: Vec<crate::periodic::Schedule>,
    services: Vec<Service>,
    relay: Option<crate::outbox::RelayConfig>,
    /// True once [`relay`](WorkerBuilder::relay) was called: the relay is
    /// then work of its own (a relay-only worker needs no handler), not
    /// only the default every worker runs.
    relay_asked: bool,
    /// The paced vacuum's settings when set explicitly (else the defaults
    /// with the settings' threshold, when the settings turn it on).
    vacuum: Option<crate::vacuum::VacuumConfig>,
    /// False after `without_vacuum`.
    vacuum_on: bool,
    projectors: Vec<Arc<dyn crate::projector::Projector>>,
}

/// What a background service is handed when the worker starts.
#[derive(Debug, Clone)]
pub struct ServiceContext {
    /// Fires at shutdown; the service runs until then.
    pub stop: CancellationToken,
    /// The worker's health, where the service reports itself failing
    /// ([`Health::set_failing`](super::Health::set_failing)) so `/healthz`
    /// names it.
    pub health: Arc<super::Health>,
}

/// A background service a worker runs beside its claim loop (a sync
/// reconciler): given the token that fires at shutdown and the worker's
/// health, it runs until then.
pub type Service =
    Box<dyn FnOnce(ServiceContext) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("settings", &self.effective_settings())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// A builder over `queue` with the default settings and nothing added.
    pub(super) fn new(queue: Queue) -> Self {
        WorkerBuilder {
            queue,
            base: WorkerSettings::default(),
            lanes: Vec::new(),
            capacity: None,
            lease: None,
            metrics_addr: None,
            registry: Registry::new(),
            errors: Vec::new(),
            steps: Vec::new(),
            sweep: true,
            schedules: Vec::new(),
            services: Vec::new(),
            relay: Some(crate::outbox::RelayConfig::default()),
            relay_asked: false,
            vacuum: None,
            vacuum_on: true,
            projectors: Vec::new(),
        }
    }

    /// Sets the base settings every knob starts from (lanes and capacity
    /// included). Explicit calls, before or after, override their field.
    pub fn settings(mut self, settings: WorkerSettings) -> Self {
        self.base = settings;
        self
    }

    /// Adds a lane to drain. The lanes named this way replace the base
    /// settings' lanes (the default `default` included), in call order.
    pub fn lane(mut self, lane: impl Into<String>) -> Self {
        self.lanes.push(lane.into());
        self
    }

    /// Sets how many handlers run at once.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Sets the lease (the renewal interval to a third of it, the renewal
    /// timeout to a fifteenth).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Where `/healthz` and `/metrics` listen: an address, or `None` for no
    /// listener (the default is [`METRICS_ADDR_DEFAULT`], or
    /// `DROVER_METRICS_ADDR` through [`WorkerSettings::from_env`]). A
    /// library worker inside a service that serves its own metrics
    /// usually wants `None`.
    pub fn metrics_addr(mut self, addr: impl Into<Option<SocketAddr>>) -> Self {
        self.metrics_addr = Some(addr.into());
        self
    }

    /// The settings [`build`](WorkerBuilder::build) will check and use: the
    /// base with every explicit call applied.
    pub fn effective_settings(&self) -> WorkerSettings {
        let mut s = self.base.clone();
        if !self.lanes.is_empty() {
            s.lanes.clone_from(&self.lanes);
        }
        if let Some(c) = self.capacity {
            s.capacity = c;
        }
        if let Some(lease) = self.lease {
            s.set_lease(lease);
        }
        if let Some(addr) = self.metrics_addr {
            s.metrics_addr = addr;
        }
        s
    }

    /// Adds a handler for its kind.
    pub fn handler<H: Handler>(mut self, handler: H) -> Self {
        self.queue.register_kind::<H::Job>();
        if let Err(e) = self.registry.add(handler) {
            self.errors.push(e);
        }
        self
    }

    /// Declares a role's strategies (printed by `drover handlers`). A
    /// blank one, or a role missing one of the four
    /// [`ROLE_STRATEGIES`](super::ROLE_STRATEGIES), makes
    /// [`WorkerBuilder::build`] fail naming the role and the strategy.
    pub fn role(mut self, role: RoleInfo) -> Self {
        if let Err(e) = self.registry.add_role(role) {
            self.errors.push(e);
        }
        self
    }

    /// The queue the worker drains.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Records a problem `build` reports.
    pub(crate) fn error(mut self, e: Error) -> Self {
        self.errors.push(e);
        self
    }

    /// Adds a host step to the sweep.
    pub fn sweep_step(mut self, step: Box<dyn SweepStep>) -> Self {
        self.steps.push(step);
        self
    }

    /// Adds a periodic schedule; this worker's scheduler enqueues its ticks
    /// (one item per tick across every worker declaring it). Checked by
    /// [`WorkerBuilder::build`].
    pub fn schedule(mut self, schedule: crate::periodic::Schedule) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Adds a background service, run beside the claim loop from start to
    /// shutdown (its token fires once in-flight work has drained).
    pub fn service(mut self, service: Service) -> Self {
        self.services.push(service);
        self
    }

    /// Adds a projector: the worker runs it beside its claim loop (one runner
    /// per projector and tenant across the fleet, by lease), and `drover
    /// handlers` prints its declared strategies. Checked by
    /// [`WorkerBuilder::build`] (a bad name or a blank strategy fails it).
    pub fn projector(mut self, projector: impl crate::projector::Projector) -> Self {
        let p: Arc<dyn crate::projector::Projector> = Arc::new(projector);
        match crate::projector::validate(p.as_ref()) {
            Ok(()) => {
                let role = p.strategy().as_role(p.name());
                if let Err(e) = self.registry.add_role(role) {
                    self.errors.push(e);
                }
                if self.projectors.iter().any(|q| q.name() == p.name()) {
                    self.errors.push(Error::Config(format!(
                        "two projectors are named {}",
                        p.name()
                    )));
                }
                self.projectors.push(p);
            }
            Err(e) => self.errors.push(e),
        }
        self
    }

    /// Turns this worker's sweep off (another process sweeps).
    pub fn without_sweep(mut self) -> Self {
        self.sweep = false;
        self
    }

    /// Sets the outbox relay this worker runs beside its claim loop (on by
    /// default with [`RelayConfig::default`](crate::outbox::RelayConfig)).
    /// Called explicitly, the relay counts as this worker's work: a worker
    /// that only relays needs no handler.
    pub fn relay(mut self, config: crate::outbox::RelayConfig) -> Self {
        self.relay = Some(config);
        self.relay_asked = true;
        self
    }

    /// Turns this worker's outbox relay off (another process relays); the
    /// sweep then relays no outbox rows either.
    pub fn without_relay(mut self) -> Self {
        self.relay = None;
        self.relay_asked = false;
        self
    }

    /// Sets the paced vacuum this worker runs beside its claim loop on
    /// PostgreSQL (on by default with [`VacuumConfig::default`] and the
    /// settings' `vacuum_threshold`); overrides the settings' `vacuum` and
    /// `vacuum_threshold` (`DROVER_VACUUM`, `DROVER_VACUUM_THRESHOLD`).
    /// [`without_vacuum`](WorkerBuilder::without_vacuum), before or after,
    /// still turns it off.
    ///
    /// [`VacuumConfig::default`]: crate::vacuum::VacuumConfig
    pub fn vacuum(mut self, config: crate::vacuum::VacuumConfig) -> Self {
        self.vacuum = Some(config);
        self
    }

    /// Turns this worker's paced vacuum off (autovacuum alone, or another
    /// process, keeps the tables), whatever the settings say.
    pub fn without_vacuum(mut self) -> Self {
        self.vacuum_on = false;
        self
    }

    /// True when the worker has work of its own: a handler, a projector, a
    /// service (a reconciler), a schedule of its own, or a relay asked for
    /// with [`relay`](WorkerBuilder::relay). A worker may run roles only
    /// (no handler: it then claims nothing); the housekeeping every worker
    /// runs by default (the relay, the sweep, the heartbeat, the vacuum)
    /// does not count, so a builder whose handlers were forgotten is still
    /// refused.
    pub fn has_work(&self) -> bool {
        !self.registry.is_empty()
            || !self.projectors.is_empty()
            || !self.services.is_empty()
            || !self.schedules.is_empty()
            || (self.relay_asked && self.relay.is_some())
    }

    /// Checks everything and builds the worker.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first problem: a handler without a
    /// strategy, a role missing one of the four strategies, two handlers for
    /// a kind, nothing to do (see [`WorkerBuilder::has_work`]), settings
    /// that contradict each other, or a capacity the store's pool cannot
    /// serve;
    /// [`Error::InvalidInput`] naming the schedule and field for a schedule
    /// that does not compile (a bad cron expression, an unknown zone).
    pub fn build(mut self) -> Result<Worker> {
        let settings = self.effective_settings();
        if let Some(e) = std::mem::take(&mut self.errors).into_iter().next() {
            return Err(e);
        }
        if !self.has_work() {
            return Err(Error::Config(
                "the worker has nothing to do: no handler, projector, service (reconciler), \
                 schedule of its own, or relay asked for; add a handler, or call \
                 .relay(RelayConfig::default()) for a worker that only relays (the default \
                 relay, sweep, heartbeat and vacuum alone are housekeeping, not work)"
                    .into(),
            ));
        }
        settings.validate(self.queue.store().pool_size())?;
        let scheduler = crate::periodic::worker_scheduler(
            &self.queue,
            std::mem::take(&mut self.schedules),
            &settings,
            &mut self.registry,
        )?;
        let sweeper = Sweeper::new(
            self.queue.clone(),
            SweepConfig {
                retention: settings.item_retention,
                ..SweepConfig::every(settings.sweep_interval)
            },
        )?;
        let relay = match self.relay.take() {
            Some(config) => {
                let relay = Arc::new(crate::outbox::Relay::new(self.queue.clone(), config)?);
                self.registry.add_role(crate::outbox::relay_role())?;
                self.steps
                    .push(Box::new(crate::outbox::RelaySweep::new(relay.clone())));
                Some(relay)
            }
            None => None,
        };
        // Declared wherever it is on, so `drover handlers` (over memory)
        // lists it; started only where there is garbage: PostgreSQL.
        let vacuumer = if self.vacuum_on && (settings.vacuum || self.vacuum.is_some()) {
            let config = self
                .vacuum
                .take()
                .unwrap_or_else(|| crate::vacuum::VacuumConfig {
                    dead_threshold: settings.vacuum_threshold,
                    ..crate::vacuum::VacuumConfig::default()
                });
            let vacuumer = crate::vacuum::Vacuumer::new(self.queue.clone(), config)?;
            self.registry.add_role(crate::vacuum::vacuum_role())?;
            (self.queue.store().backend() == crate::store::Backend::Postgres).then_some(vacuumer)
        } else {
            None
        };
        if self.sweep {
            let steps: Vec<String> = self.steps.iter().map(|s| s.name().to_owned()).collect();
            self.registry.add_role(super::roles::sweep_role(&steps))?;
        }
        // Every role and handler is in now: check them all once more.
        self.registry.validate()?;
        let sweeper = self
            .steps
            .into_iter()
            .fold(sweeper, |s, step| s.with_step(step));
        Ok(Worker {
            queue: self.queue,
            settings: Arc::new(settings),
            registry: Arc::new(self.registry),
            sweeper: self.sweep.then_some(sweeper),
            scheduler,
            services: self.services,
            relay,
            vacuumer,
            projectors: self.projectors,
        })
    }
}
