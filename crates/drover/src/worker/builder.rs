//! [`WorkerBuilder`]: collects lanes, handlers, services and knobs, and
//! checks them all before a [`Worker`] exists. Each role adds its own
//! builder calls next to its code (`relay`, `schedule`, `projector`,
//! `reconciler`, `vacuum`, `sweep_step`); the builder names none of them:
//! the default roles' knobs are kept in type-keyed slots (`knobs`) and
//! turned into services at `build` by the assembly the module above the
//! roles set (`crate::defaults`, through [`Worker::builder`]).
//!
//! Invariants: the order of calls never matters (the base settings and
//! the explicit calls are kept apart and merged at [`WorkerBuilder::build`]);
//! a builder call that cannot be honoured is kept and reported by `build`,
//! never dropped; nothing runs or connects until
//! [`Worker::start`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::knobs::{Assembly, Knobs, RoleKnobs};
use super::{Handler, Registry, RoleInfo, Service, Worker, WorkerSettings};
use crate::error::{Error, Result};
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
    /// The services added so far (roles of their own), in call order.
    services: Vec<Box<dyn Service>>,
    /// The default roles' knobs, one slot per role.
    knobs: Knobs,
    /// What turns the knobs into the default roles' services at `build`
    /// (`None`: no default role runs).
    assembly: Option<Assembly>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("settings", &self.effective_settings())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// A builder over `queue` with the default settings, nothing added and
    /// no default role ([`Worker::builder`] adds those).
    pub(crate) fn new(queue: Queue) -> Self {
        WorkerBuilder {
            queue,
            base: WorkerSettings::default(),
            lanes: Vec::new(),
            capacity: None,
            lease: None,
            metrics_addr: None,
            registry: Registry::new(),
            errors: Vec::new(),
            services: Vec::new(),
            knobs: Knobs::default(),
            assembly: None,
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
    /// listener (the default is [`METRICS_ADDR_DEFAULT`](super::settings::METRICS_ADDR_DEFAULT), or
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

    /// Declares a limit in code: a concurrency on a lane, a kind, or each
    /// group of a kind, or an ordered group
    /// ([`LimitSpec::ordered`](crate::store::limits::LimitSpec::ordered));
    /// a kind's own consts declare the last ones as well. Written when the
    /// worker starts; an operator's `drover limits set` wins over it until
    /// cleared.
    pub fn limit(
        mut self,
        scope: crate::store::limits::LimitScope,
        spec: impl Into<crate::store::limits::LimitSpec>,
    ) -> Self {
        if let Err(e) = self.registry.declare_limit(scope, spec) {
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

    /// Adds a background service given as a boxed closure, run beside the
    /// claim loop from start to shutdown (its token fires once in-flight
    /// work has drained). As [`with_service`](WorkerBuilder::with_service).
    pub fn service(self, service: super::ServiceFn) -> Self {
        self.with_service(service)
    }

    /// Adds a [`Service`], run beside the claim loop from start to shutdown
    /// (its token fires once in-flight work has drained); its
    /// [`role`](Service::role), if it declares one, is added as
    /// [`role`](WorkerBuilder::role) adds it. Every role's own builder call
    /// (`reconciler`, `projector`) ends here.
    pub fn with_service(mut self, service: impl Service) -> Self {
        if let Some(role) = service.role() {
            self = self.role(role);
        }
        self.services.push(Box::new(service));
        self
    }

    /// The services added so far, in call order.
    pub(crate) fn services(&self) -> &[Box<dyn Service>] {
        &self.services
    }

    /// Changes a role's knobs (from its defaults when no call touched them
    /// yet): what the roles' own builder calls end in.
    pub(crate) fn knobs<K: RoleKnobs>(mut self, change: impl FnOnce(&mut K)) -> Self {
        self.knobs.change(change);
        self
    }

    /// Sets what turns the roles' knobs into the default roles' services at
    /// [`build`](WorkerBuilder::build).
    pub(crate) fn with_assembly(mut self, assembly: Assembly) -> Self {
        self.assembly = Some(assembly);
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
        !self.registry.is_empty() || !self.services.is_empty() || self.knobs.is_work()
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
        // The default roles first: they are declared after the builder's own.
        let mut services = match self.assembly {
            Some(assemble) => {
                assemble(&mut self.knobs, &self.queue, &settings, &mut self.registry)?
            }
            None => Vec::new(),
        };
        services.append(&mut self.services);
        // Every role and handler is in now: check them all once more.
        self.registry.validate()?;
        Ok(Worker {
            queue: self.queue,
            settings: Arc::new(settings),
            registry: Arc::new(self.registry),
            services,
        })
    }
}
