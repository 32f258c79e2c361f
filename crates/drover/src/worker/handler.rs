//! Handlers: the code that runs items of one kind, the typed outcome it
//! returns, the strategy it declares, and the registry the worker builds.
//!
//! A handler never builds its own [`JobContext`]; the worker hands it the one
//! its claim made. Its result says what happens next: done, snooze (defer
//! without spending an attempt), retry (spend one), fatal (straight to the
//! dead letter), or cancel. Panics and timeouts are turned into retryable
//! failures by the executor, never into a dead worker.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::{JobContext, Kind};

/// What a successful run asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// The item is done.
    Completed,
    /// The item is done and this is its result (see
    /// [`Returns`](crate::queue::Returns)), stored by the fenced write that
    /// completes it. Build it with [`Done::output`]. A result over 256 KiB
    /// is refused: the item fails (fatal) saying so, nothing is dropped
    /// silently.
    Output(serde_json::Value),
    /// The handler already wrote the item's final state itself, fenced on
    /// its claim token in its own transaction (the workflow runner does, so
    /// the item's completion and its record's write land together): the
    /// executor writes nothing more.
    Settled,
}

impl Done {
    /// Done with `result` as the item's result.
    ///
    /// # Errors
    /// [`JobError::Fatal`] when the result does not serialize as JSON.
    pub fn output(result: &impl serde::Serialize) -> Outcome {
        serde_json::to_value(result)
            .map(Done::Output)
            .map_err(|e| JobError::Fatal(format!("the result does not serialize: {e}")))
    }
}

/// A run that did not complete, and what should happen to the item.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobError {
    /// Try again after the kind's backoff; spends one attempt.
    Retry(String),
    /// Never try again: dead-letter now.
    Fatal(String),
    /// Not now: run again after the delay; spends no attempt.
    Snooze(Duration),
    /// The work is moot: cancel the item (final), spending no attempt.
    Cancel(String),
}

impl JobError {
    /// A retryable failure from any displayable error.
    pub fn retry(e: impl fmt::Display) -> Self {
        JobError::Retry(e.to_string())
    }

    /// A fatal failure from any displayable error.
    pub fn fatal(e: impl fmt::Display) -> Self {
        JobError::Fatal(e.to_string())
    }

    /// Hands the item back at once without spending an attempt, after the
    /// handler closed its group or kind
    /// ([`JobContext::close_group_until`](crate::queue::JobContext::close_group_until)):
    /// it is pending again and the closure keeps it until it reopens.
    pub fn until_reopened() -> Self {
        JobError::Snooze(Duration::ZERO)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retry(m) => write!(f, "retryable: {m}"),
            JobError::Fatal(m) => write!(f, "fatal: {m}"),
            JobError::Snooze(d) => write!(f, "snoozed for {d:?}"),
            JobError::Cancel(m) => write!(f, "cancelled: {m}"),
        }
    }
}

/// What a handler returns.
pub type Outcome = std::result::Result<Done, JobError>;

/// Turns any `Result` into an [`Outcome`]-compatible one with `?`.
pub trait ResultExt<T> {
    /// The error is worth a retry.
    fn retryable(self) -> std::result::Result<T, JobError>;
    /// The error will not go away: dead-letter.
    fn fatal(self) -> std::result::Result<T, JobError>;
}

impl<T, E: fmt::Display> ResultExt<T> for std::result::Result<T, E> {
    fn retryable(self) -> std::result::Result<T, JobError> {
        self.map_err(JobError::retry)
    }

    fn fatal(self) -> std::result::Result<T, JobError> {
        self.map_err(JobError::fatal)
    }
}

/// The recovery story a handler declares (DESIGN §9): how it stays correct
/// when it runs twice, how it retries, where it keeps its progress and how
/// a rerun replays from it, how it recovers after a crash. `drover
/// handlers` prints these; the worker refuses to start a handler whose
/// strategy has a blank field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    /// Why running twice is harmless (an idempotency key, a fenced write …).
    pub idempotency: &'static str,
    /// What a failure does (backoff, budget).
    pub retry: &'static str,
    /// Where a run keeps its progress and what a rerun replays from it
    /// ("none: one step, rerun from the start" is a fine answer).
    pub checkpoint: &'static str,
    /// What happens after a crash mid-run.
    pub recovery: &'static str,
}

impl Strategy {
    fn check(&self, kind: &str) -> Result<()> {
        for (name, v) in [
            ("idempotency", self.idempotency),
            ("retry", self.retry),
            ("checkpoint", self.checkpoint),
            ("recovery", self.recovery),
        ] {
            if v.trim().is_empty() {
                return Err(Error::Config(format!(
                    "the handler of {kind} declares no {name} strategy"
                )));
            }
        }
        Ok(())
    }
}

/// Runs items of one kind.
///
/// ```
/// use drover::queue::{JobContext, Kind};
/// use drover::worker::{Done, Handler, Outcome, Strategy};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping { n: u32 }
/// # impl Kind for Ping { const NAME: &'static str = "ping"; }
/// struct Pinger;
/// impl Handler for Pinger {
///     type Job = Ping;
///     const STRATEGY: Strategy = Strategy {
///         idempotency: "pings are harmless to repeat",
///         retry: "default backoff, 5 attempts",
///         checkpoint: "none: one step, a rerun starts over",
///         recovery: "a crashed ping is swept and run again",
///     };
///     async fn handle(&self, _cx: &JobContext, _job: Ping) -> Outcome {
///         Ok(Done::Completed)
///     }
/// }
/// ```
pub trait Handler: Send + Sync + 'static {
    /// The kind this handler runs.
    type Job: Kind;
    /// Its declared strategy.
    const STRATEGY: Strategy;
    /// The permissions the handler's own calls take. Each must be covered
    /// by the kind's enqueue permission ([`Kind::PERMISSION`], see
    /// [`permission_covers`](crate::queue::permission_covers)), so nobody
    /// reaches through the queue what they could not do directly: the worker
    /// refuses to start a handler whose requirement is not covered.
    const REQUIRES: &'static [&'static str] = &[];

    /// The longest a run may take before it is cancelled and counted as a
    /// failure (its token fires first, and it gets the worker's
    /// `cancel_grace` to return); `None` uses the worker's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Runs one item.
    fn handle(&self, cx: &JobContext, job: Self::Job) -> impl Future<Output = Outcome> + Send;
}

pub(crate) type BoxOutcome<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// A handler with its payload type erased, as the registry holds it.
pub(crate) trait ErasedHandler: Send + Sync {
    fn run<'a>(&'a self, cx: &'a JobContext) -> BoxOutcome<'a>;
    fn strategy(&self) -> Strategy;
    fn permission(&self) -> &'static str;
    fn requires(&self) -> &'static [&'static str];
    fn timeout(&self) -> Option<Duration>;
}

struct Typed<H>(H);

impl<H: Handler> ErasedHandler for Typed<H> {
    fn run<'a>(&'a self, cx: &'a JobContext) -> BoxOutcome<'a> {
        Box::pin(async move {
            // A payload that does not decode will never decode: fail it now
            // (naming the field) instead of burning the retry budget.
            let job: H::Job = serde_json::from_value(cx.item().payload.clone()).map_err(|e| {
                JobError::Fatal(format!("payload does not decode as {}: {e}", H::Job::NAME))
            })?;
            self.0.handle(cx, job).await
        })
    }

    fn strategy(&self) -> Strategy {
        H::STRATEGY
    }

    fn permission(&self) -> &'static str {
        <H::Job as Kind>::PERMISSION
    }

    fn requires(&self) -> &'static [&'static str] {
        H::REQUIRES
    }

    fn timeout(&self) -> Option<Duration> {
        self.0.timeout()
    }
}

/// One row of [`Registry::describe`], as `drover handlers` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HandlerInfo {
    /// The kind.
    pub kind: String,
    /// Its declared idempotency strategy.
    pub idempotency: String,
    /// Its declared retry strategy.
    pub retry: String,
    /// Its declared checkpoint/replay strategy.
    pub checkpoint: String,
    /// Its declared recovery strategy.
    pub recovery: String,
    /// The permission a producer needs to enqueue the kind.
    pub permission: String,
    /// The permissions its own calls take (each covered by `permission`).
    pub requires: Vec<String>,
}

/// Checks that the kind's enqueue permission covers every permission its
/// handler's own calls take.
fn check_requires(kind: &str, permission: &str, requires: &[&str]) -> Result<()> {
    for r in requires {
        if !crate::queue::permission_covers(permission, r) {
            return Err(Error::Config(format!(
                "the handler of {kind} requires the permission {r:?}, which the kind's \
                 enqueue permission {permission:?} does not cover: a producer could reach \
                 through the queue what it cannot do directly (set Kind::PERMISSION to {r:?} \
                 or to a wildcard covering it)"
            )));
        }
    }
    Ok(())
}

/// The kinds a worker runs and their handlers. Built by one builder call per
/// handler; no shared list to edit.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: BTreeMap<String, Arc<dyn ErasedHandler>>,
    roles: Vec<RoleInfo>,
    /// The concurrency limits declared in code (the kinds' consts and
    /// `WorkerBuilder::limit`), written at the worker's start.
    limits: BTreeMap<crate::store::limits::LimitScope, crate::store::limits::LimitSpec>,
    /// The rate limits declared in code (the kinds' consts and
    /// `WorkerBuilder::rate`), written at the worker's start.
    rates: BTreeMap<crate::store::limits::LimitScope, crate::store::rates::Rate>,
    /// The lanes work this worker creates for itself goes to, each with
    /// what writes there (`WorkerBuilder::build` refuses a lane it neither
    /// drains nor was told is drained elsewhere).
    writes: BTreeMap<String, Vec<String>>,
}

/// The four strategies every role declares (DESIGN §9), besides any of
/// its own: [`Registry::add_role`] refuses a role missing one.
pub const ROLE_STRATEGIES: [&str; 4] = ["idempotency", "retry", "checkpoint", "recovery"];

/// A worker role beyond handlers (the outbox relay, the scheduler, the
/// sweep, the paced vacuum, a projector, a workflow runner, a reconciler)
/// and the strategies it declares, as `drover handlers` prints them.
///
/// Every role declares the four of [`ROLE_STRATEGIES`] and may add its own
/// (a projector's `lag`, a workflow's `compensation`). Serialized as
/// `{"role", "name", "strategies": {"<what>": "<declared>", ...}}`, the
/// strategies in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleInfo {
    /// The role (`workflow runner`, `sync reconciler`).
    pub role: String,
    /// Its name (the workflow's, the reconciler's).
    pub name: String,
    /// Each declared strategy: what it is for, and what it says.
    pub strategies: Vec<(String, String)>,
}

impl RoleInfo {
    /// A role declaring the four strategies of `strategy`; add its own with
    /// [`RoleInfo::with`].
    pub fn new(role: impl Into<String>, name: impl Into<String>, strategy: Strategy) -> Self {
        RoleInfo {
            role: role.into(),
            name: name.into(),
            strategies: vec![
                ("idempotency".into(), strategy.idempotency.into()),
                ("retry".into(), strategy.retry.into()),
                ("checkpoint".into(), strategy.checkpoint.into()),
                ("recovery".into(), strategy.recovery.into()),
            ],
        }
    }

    /// Adds a role-specific strategy.
    #[must_use]
    pub fn with(mut self, what: impl Into<String>, says: impl Into<String>) -> Self {
        self.strategies.push((what.into(), says.into()));
        self
    }

    /// What the role declares for `what`, if anything.
    pub fn strategy(&self, what: &str) -> Option<&str> {
        self.strategies
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, s)| s.as_str())
    }

    /// Refuses a blank strategy, one declared twice, or one of the four
    /// [`ROLE_STRATEGIES`] missing, naming the role and the strategy.
    fn check(&self) -> Result<()> {
        let who = format!("the {} {}", self.role, self.name);
        for (i, (what, says)) in self.strategies.iter().enumerate() {
            if says.trim().is_empty() {
                return Err(Error::Config(format!("{who} declares no {what} strategy")));
            }
            if self.strategies[..i].iter().any(|(w, _)| w == what) {
                return Err(Error::Config(format!(
                    "{who} declares its {what} strategy twice"
                )));
            }
        }
        if let Some(missing) = ROLE_STRATEGIES.iter().find(|w| self.strategy(w).is_none()) {
            return Err(Error::Config(format!(
                "{who} declares no {missing} strategy (every role declares idempotency, \
                 retry, checkpoint and recovery)"
            )));
        }
        Ok(())
    }
}

impl serde::Serialize for RoleInfo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeStruct};

        /// The strategies as one object, in declaration order.
        struct Strategies<'a>(&'a [(String, String)]);
        impl serde::Serialize for Strategies<'_> {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (what, says) in self.0 {
                    m.serialize_entry(what, says)?;
                }
                m.end()
            }
        }

        let mut st = s.serialize_struct("RoleInfo", 3)?;
        st.serialize_field("role", &self.role)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("strategies", &Strategies(&self.strategies))?;
        st.end()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.handlers.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a handler for its kind.
    ///
    /// # Errors
    /// [`Error::Config`] when the kind already has a handler, the
    /// handler's strategy is blank, or the kind's enqueue permission does
    /// not cover what the handler's `REQUIRES` names (the message names both).
    pub fn add<H: Handler>(&mut self, handler: H) -> Result<()> {
        let kind = <H::Job as Kind>::NAME;
        crate::item::validate_kind(kind)?;
        H::STRATEGY.check(kind)?;
        check_requires(kind, <H::Job as Kind>::PERMISSION, H::REQUIRES)?;
        if self.handlers.contains_key(kind) {
            return Err(Error::Config(format!("{kind} has two handlers")));
        }
        use crate::store::limits::{LimitScope, LimitSpec};
        if let Some(n) = <H::Job as Kind>::CONCURRENCY {
            self.declare_limit(LimitScope::Kind(kind.to_owned()), n)?;
        }
        let group = if <H::Job as Kind>::ORDERED {
            Some(LimitSpec {
                concurrency: <H::Job as Kind>::GROUP_CONCURRENCY.unwrap_or(1),
                ..LimitSpec::ordered(<H::Job as Kind>::ON_DEAD_LETTER)
            })
        } else {
            <H::Job as Kind>::GROUP_CONCURRENCY.map(LimitSpec::concurrency)
        };
        if let Some(spec) = group {
            self.declare_limit(LimitScope::KindPerGroup(kind.to_owned()), spec)?;
        }
        if let Some(rate) = <H::Job as Kind>::RATE {
            self.declare_rate(LimitScope::Kind(kind.to_owned()), rate)?;
        }
        if let Some(rate) = <H::Job as Kind>::GROUP_RATE {
            self.declare_rate(LimitScope::KindPerGroup(kind.to_owned()), rate)?;
        }
        // A kind that names a lane of its own routes its items there (the
        // enqueue and the outbox relay use it unless the producer says
        // otherwise); one left on the default lane is routed by each
        // producer, which no builder can see.
        let lane = <H::Job as Kind>::LANE;
        if lane != crate::item::DEFAULT_LANE {
            self.writes_to(
                lane,
                format!("kind {kind} (its Kind::LANE: where its enqueued and relayed items go)"),
            );
        }
        self.handlers
            .insert(kind.to_owned(), Arc::new(Typed(handler)));
        Ok(())
    }

    /// Declares a limit in code (written at the worker's start; an
    /// operator's setting wins over it).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a malformed name or spec (an ordered
    /// limit other than a per-group limit of 1); [`Error::Config`] when
    /// the scope is declared twice differently.
    pub fn declare_limit(
        &mut self,
        scope: crate::store::limits::LimitScope,
        spec: impl Into<crate::store::limits::LimitSpec>,
    ) -> Result<()> {
        let spec = spec.into();
        scope.validate()?;
        spec.validate(&scope)?;
        match self.limits.get(&scope) {
            Some(m) if *m != spec => Err(Error::Config(format!(
                "the limit on {scope} is declared twice: {m} and {spec}"
            ))),
            _ => {
                self.limits.insert(scope, spec);
                Ok(())
            }
        }
    }

    /// Declares a rate limit in code (written at the worker's start; an
    /// operator's rate wins over it).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a malformed name or rate;
    /// [`Error::Config`] when the scope's rate is declared twice
    /// differently.
    pub fn declare_rate(
        &mut self,
        scope: crate::store::limits::LimitScope,
        rate: crate::store::rates::Rate,
    ) -> Result<()> {
        scope.validate()?;
        rate.validate()?;
        match self.rates.get(&scope) {
            Some(r) if *r != rate => Err(Error::Config(format!(
                "the rate on {scope} is declared twice: {r} and {rate}"
            ))),
            _ => {
                self.rates.insert(scope, rate);
                Ok(())
            }
        }
    }

    /// The rate limits declared in code, by scope.
    pub fn rates(&self) -> &BTreeMap<crate::store::limits::LimitScope, crate::store::rates::Rate> {
        &self.rates
    }

    /// Records that `by` (a role of this worker, or a kind it handles)
    /// writes items into `lane`, which this worker then must drain unless
    /// told another worker does.
    pub(crate) fn writes_to(&mut self, lane: &str, by: String) {
        let by_lane = self.writes.entry(lane.to_owned()).or_default();
        if !by_lane.contains(&by) {
            by_lane.push(by);
        }
    }

    /// The lanes work this worker creates for itself goes to, each with
    /// what writes there (the heartbeat, its own schedules and workflows,
    /// the kinds it handles that name a lane of their own).
    pub fn lanes_written(&self) -> &BTreeMap<String, Vec<String>> {
        &self.writes
    }

    /// The limits declared in code, by scope.
    pub fn limits(
        &self,
    ) -> &BTreeMap<crate::store::limits::LimitScope, crate::store::limits::LimitSpec> {
        &self.limits
    }

    /// Adds a role's declared strategies.
    ///
    /// # Errors
    /// [`Error::Config`] naming the role and the strategy when one is
    /// blank, declared twice, or one of the four [`ROLE_STRATEGIES`] is
    /// missing.
    pub fn add_role(&mut self, role: RoleInfo) -> Result<()> {
        role.check()?;
        self.roles.push(role);
        Ok(())
    }

    /// Every role's declared strategies, in the order they were added.
    pub fn roles(&self) -> &[RoleInfo] {
        &self.roles
    }

    /// The kinds handled, sorted.
    pub fn kinds(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }

    /// True when no kind is handled.
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    pub(crate) fn get(&self, kind: &str) -> Option<&Arc<dyn ErasedHandler>> {
        self.handlers.get(kind)
    }

    /// Every handler's declared strategy, sorted by kind.
    pub fn describe(&self) -> Vec<HandlerInfo> {
        self.handlers
            .iter()
            .map(|(kind, h)| {
                let s = h.strategy();
                HandlerInfo {
                    kind: kind.clone(),
                    idempotency: s.idempotency.to_owned(),
                    retry: s.retry.to_owned(),
                    checkpoint: s.checkpoint.to_owned(),
                    recovery: s.recovery.to_owned(),
                    permission: h.permission().to_owned(),
                    requires: h.requires().iter().map(|r| (*r).to_owned()).collect(),
                }
            })
            .collect()
    }

    /// Checks every handler's strategy and permissions, and every role's
    /// strategies, again (the worker calls this at build).
    ///
    /// # Errors
    /// [`Error::Config`] naming the first handler with a blank strategy or
    /// a requirement its kind's permission does not cover, or the first
    /// role missing one of the four strategies.
    pub fn validate(&self) -> Result<()> {
        for (kind, h) in &self.handlers {
            h.strategy().check(kind)?;
            check_requires(kind, h.permission(), h.requires())?;
        }
        for role in &self.roles {
            role.check()?;
        }
        Ok(())
    }
}
