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
//! never dropped; a worker never strands work it creates itself: `build`
//! refuses one whose heartbeat, schedules, workflow steps or routed kinds
//! write to a lane it neither drains nor was told another worker drains
//! (an error naming the lane, the writer and the call that fixes it, rather
//! than a lane added behind the user's back: draining a lane is a capacity
//! decision the builder cannot make for them); nothing runs or connects
//! until [`Worker::start`].
//!
//! The builder also carries the service's state (a pool, a client: one
//! value per type, given with [`WorkerBuilder::state`]) for the setups that
//! need it ([`WorkerBuilder::with_state`], `register!(state: …)`): those
//! run at `build`, once every `state` call has been made, so the order of
//! calls still does not matter.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::knobs::{Assembly, Knobs, RoleKnobs};
use super::{Handler, Registry, RoleInfo, Service, Worker, WorkerSettings};
use crate::error::{Error, Result};
use crate::queue::Queue;

/// A value the service gave the builder, shared by every setup that asks
/// for its type.
type StateValue = Arc<dyn Any + Send + Sync>;

/// A setup handed the state it waits for (of the type it was filed under).
pub(crate) type ApplyState =
    Box<dyn FnOnce(WorkerBuilder, &(dyn Any + Send + Sync)) -> WorkerBuilder + Send>;

/// A setup waiting for the state of one type, run at `build`.
pub(crate) struct StatefulSetup {
    /// The state's type.
    pub(crate) type_id: TypeId,
    /// Its name, for the error when it was never given.
    pub(crate) type_name: &'static str,
    /// The setup, handed the state (of type `type_id`).
    pub(crate) apply: ApplyState,
}

/// How many rounds of stateful setups `build` runs: a setup may add another
/// (through a `with_state` of its own), but not forever.
const STATEFUL_ROUNDS: usize = 16;

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
    drained_elsewhere: Vec<String>,
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
    /// The service's state, one value per type.
    state: HashMap<TypeId, StateValue>,
    /// The setups that wait for a state, in call order.
    stateful: Vec<StatefulSetup>,
    /// The binary's registered setups (`register!`, with or without
    /// state), applied at `build` unless
    /// [`without_registered`](WorkerBuilder::without_registered) dropped
    /// them (`None`: none apply).
    registered: Option<fn(WorkerBuilder) -> WorkerBuilder>,
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
            drained_elsewhere: Vec::new(),
            capacity: None,
            lease: None,
            metrics_addr: None,
            registry: Registry::new(),
            errors: Vec::new(),
            services: Vec::new(),
            knobs: Knobs::default(),
            assembly: None,
            state: HashMap::new(),
            stateful: Vec::new(),
            registered: None,
        }
    }

    /// Gives the worker's setups a value of the service's (its database
    /// pool, an HTTP client, a config): every
    /// [`with_state`](WorkerBuilder::with_state) setup and every
    /// `register!(state: …)` registration asking for type `T` receives it at
    /// [`build`](WorkerBuilder::build). One value per type: a second call
    /// with the same type replaces the first. Wrap values the setups should
    /// tell apart in types of their own.
    ///
    /// ```
    /// # use drover::worker::{Done, Handler, Outcome, Strategy, Worker, WorkerBuilder};
    /// # use drover::queue::{JobContext, Kind, Queue};
    /// #[derive(Clone)]
    /// struct Db(String); // the service's pool, say
    ///
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Report {}
    /// # impl Kind for Report { const NAME: &'static str = "report"; }
    /// struct Reporter { db: Db }
    /// # impl Handler for Reporter {
    /// #     type Job = Report;
    /// #     const STRATEGY: Strategy = Strategy { idempotency: "i", retry: "r", checkpoint: "c", recovery: "v" };
    /// #     async fn handle(&self, _cx: &JobContext, _job: Report) -> Outcome { Ok(Done::Completed) }
    /// # }
    /// // A module's setup that needs the pool (as `drover::register!(state: reports)`).
    /// fn reports(b: WorkerBuilder, db: &Db) -> WorkerBuilder {
    ///     b.handler(Reporter { db: db.clone() })
    /// }
    ///
    /// let worker = Worker::builder(Queue::memory())
    ///     .with_state(reports)
    ///     .state(Db("postgres://…".into()))
    ///     .metrics_addr(None)
    ///     .build()?;
    /// # Ok::<(), drover::Error>(())
    /// ```
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(TypeId::of::<T>(), Arc::new(value));
        self
    }

    /// The state of type `T` given with [`state`](WorkerBuilder::state), if
    /// any (so far: a setup run at `build` sees every value).
    pub fn state_of<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.state
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }

    /// Adds a setup that needs the service's state of type `T`: it runs at
    /// [`build`](WorkerBuilder::build) with the value given to
    /// [`state`](WorkerBuilder::state), whichever call came first, and adds
    /// what it likes (handlers holding a pool, schedules, projectors).
    /// `build` fails naming `T` when no value of it was given: a handler
    /// that would silently be missing is refused instead.
    pub fn with_state<T, F>(mut self, setup: F) -> Self
    where
        T: Send + Sync + 'static,
        F: FnOnce(WorkerBuilder, &T) -> WorkerBuilder + Send + 'static,
    {
        self.stateful.push(StatefulSetup {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            apply: Box::new(move |b, state| match state.downcast_ref::<T>() {
                Some(s) => setup(b, s),
                // `build` looks the value up by this very TypeId.
                None => b,
            }),
        });
        self
    }

    /// Adds a setup waiting for a state (a `register!(state: …)`
    /// registration's, already erased).
    pub(crate) fn stateful_setup(mut self, setup: StatefulSetup) -> Self {
        self.stateful.push(setup);
        self
    }

    /// Runs the setups that wait for a state, each with its value, until
    /// none is left (a setup may add another).
    ///
    /// # Errors
    /// [`Error::Config`] naming the type of a state never given, or setups
    /// that keep adding setups.
    fn run_stateful(mut self) -> Result<Self> {
        for _ in 0..STATEFUL_ROUNDS {
            let setups = std::mem::take(&mut self.stateful);
            if setups.is_empty() {
                return Ok(self);
            }
            for setup in setups {
                let Some(value) = self.state.get(&setup.type_id).cloned() else {
                    return Err(Error::Config(format!(
                        "a worker setup needs the service's state of type {}: give it with \
                         WorkerBuilder::state(value) (drover_cli::run_with: \
                         `move |b| b.state(value.clone())`)",
                        setup.type_name
                    )));
                };
                self = (setup.apply)(self, &*value);
            }
        }
        Err(Error::Config(format!(
            "worker setups kept adding setups that need state after {STATEFUL_ROUNDS} rounds"
        )))
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

    /// Declares a lane this worker does not drain as drained by another
    /// worker, so work this worker writes there (the heartbeat's items, a
    /// schedule's, a workflow's steps) is not refused by
    /// [`build`](WorkerBuilder::build) as stranded. The lanes named this way
    /// replace the base settings' `drained_elsewhere`
    /// (`DROVER_DRAINED_ELSEWHERE`).
    pub fn drained_elsewhere(mut self, lane: impl Into<String>) -> Self {
        self.drained_elsewhere.push(lane.into());
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

    /// Where `/healthz`, `/readyz` and `/metrics` listen: an address, or
    /// `None` for no listener. A library worker serves none unless asked
    /// here or by `DROVER_METRICS_ADDR` through [`WorkerSettings::from_env`]
    /// (`drover worker` serves
    /// [`METRICS_ADDR_DEFAULT`](super::settings::METRICS_ADDR_DEFAULT)), so
    /// workers in one process never race for a port; port 0 binds a free
    /// one, logged at start and read back with
    /// [`RunningWorker::metrics_addr`](super::RunningWorker::metrics_addr).
    /// Needs the `metrics-listener` feature (on by default): without it,
    /// [`build`](WorkerBuilder::build) refuses an address.
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
        if !self.drained_elsewhere.is_empty() {
            s.drained_elsewhere.clone_from(&self.drained_elsewhere);
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

    /// Declares a rate limit in code on a lane, a kind, or each group of a
    /// kind (a kind's own `RATE` and `GROUP_RATE` consts declare the last
    /// two as well). Written when the worker starts; an operator's
    /// `drover limits set --rate` wins over it until cleared.
    pub fn rate(
        mut self,
        scope: crate::store::limits::LimitScope,
        rate: crate::store::rates::Rate,
    ) -> Self {
        if let Err(e) = self.registry.declare_rate(scope, rate) {
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

    /// Records that `by` (a role this builder call adds) writes work into
    /// `lane`: `build` refuses the worker unless it drains the lane or is
    /// told another worker does.
    pub(crate) fn writes_to(mut self, lane: &str, by: String) -> Self {
        self.registry.writes_to(lane, by);
        self
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

    /// Sets the setups every worker of the binary applies (the
    /// [`register!`](crate::register)ed ones), run at
    /// [`build`](WorkerBuilder::build) unless
    /// [`without_registered`](WorkerBuilder::without_registered) is called.
    pub(crate) fn with_registered(mut self, apply: fn(WorkerBuilder) -> WorkerBuilder) -> Self {
        self.registered = Some(apply);
        self
    }

    /// Leaves out every [`register!`](crate::register)ed setup of the
    /// binary: this worker gets only what its own calls add. For a test
    /// whose binary links modules that register handlers and schedules
    /// meant for the service's worker, not for the test's.
    pub fn without_registered(mut self) -> Self {
        self.registered = None;
        self
    }

    /// True when the worker has work of its own: a handler, a projector, a
    /// service (a reconciler), a schedule of its own, or a relay asked for
    /// with [`relay`](WorkerBuilder::relay). A worker may run roles only
    /// (no handler: it then claims nothing); the housekeeping every worker
    /// runs by default (the relay, the sweep, the heartbeat, the vacuum)
    /// does not count, so a builder whose handlers were forgotten is still
    /// refused. The binary's [`register!`](crate::register)ed setups are
    /// applied at [`build`](WorkerBuilder::build), so they count only there.
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
    /// that does not compile (a bad cron expression, an unknown zone);
    /// [`Error::Config`] naming the type of a state a setup needs
    /// ([`with_state`](WorkerBuilder::with_state), `register!(state: …)`)
    /// that no [`state`](WorkerBuilder::state) call gave;
    /// [`Error::Config`] naming the lane, what writes there, and the calls
    /// that fix it, for work the worker creates itself in a lane it neither
    /// drains nor was told is [drained elsewhere](WorkerBuilder::drained_elsewhere).
    pub fn build(mut self) -> Result<Worker> {
        // The registered setups are builder calls like any other: applied
        // here, so `without_registered` can drop them whenever it is called
        // (those taking state join the stateful setups run next).
        if let Some(apply) = self.registered.take() {
            self = apply(self);
        }
        self.run_stateful()?.build_checked()
    }

    /// [`build`](WorkerBuilder::build) once every setup has run.
    fn build_checked(mut self) -> Result<Worker> {
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
        #[cfg(not(feature = "metrics-listener"))]
        if let Some(addr) = settings.metrics_addr {
            return Err(Error::Config(format!(
                "a metrics address ({addr}) is set but the listener is not compiled in: \
                 build drover with its `metrics-listener` feature (drover-cli: `listener`), \
                 or leave the address unset (DROVER_METRICS_ADDR, WorkerBuilder::metrics_addr)"
            )));
        }
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
        check_lanes_written(&settings, &self.registry)?;
        Ok(Worker {
            queue: self.queue,
            settings: Arc::new(settings),
            registry: Arc::new(self.registry),
            services,
        })
    }
}

/// Refuses a worker whose own work goes to a lane nobody is known to drain:
/// not in its lanes, and not declared drained elsewhere.
///
/// # Errors
/// [`Error::Config`] for the first such lane, naming what writes there and
/// the two calls (with their flag and variable) that fix it.
fn check_lanes_written(settings: &WorkerSettings, registry: &Registry) -> Result<()> {
    let served = |lane: &str| {
        settings
            .lanes
            .iter()
            .chain(&settings.drained_elsewhere)
            .any(|l| l == lane)
    };
    match registry
        .lanes_written()
        .iter()
        .find(|(lane, _)| !served(lane))
    {
        None => Ok(()),
        Some((lane, by)) => Err(Error::Config(format!(
            "work this worker creates goes to lane {lane:?}, which it does not drain \
             (it drains {drains}): {by}; nothing would run it unless another worker drains \
             {lane:?}. Drain it here with .lane({lane:?}) (--lanes / DROVER_LANES), or, if \
             another worker drains it, say so with .drained_elsewhere({lane:?}) \
             (--drained-elsewhere / DROVER_DRAINED_ELSEWHERE)",
            drains = settings.lanes.join(", "),
            by = by.join("; "),
        ))),
    }
}
