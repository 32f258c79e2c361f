//! Orchestration types declared in code: a name, a typed state, named steps
//! and each step's optional compensation, and the strategies the workflow
//! runner must declare.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::queue::JobContext;

/// What a step asks for next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next<S> {
    /// Run `step` next with `state`.
    Step {
        /// The next step.
        step: &'static str,
        /// The new state.
        state: S,
    },
    /// Park until `at`, then run `step` with `state`.
    ParkUntil {
        /// When to resume.
        at: DateTime<Utc>,
        /// The step to resume at.
        step: &'static str,
        /// The new state.
        state: S,
    },
    /// Park until the signal `name` arrives (then run `step`, the signal's
    /// payload in [`StepContext::signal`]) or `timeout` passes (then run
    /// `on_timeout`).
    WaitSignal {
        /// The signal's name.
        name: &'static str,
        /// The step a received signal runs.
        step: &'static str,
        /// How long to wait.
        timeout: Duration,
        /// The step a timeout runs.
        on_timeout: &'static str,
        /// The new state.
        state: S,
    },
    /// The orchestration is done, with `result`.
    Complete {
        /// The result kept on the record.
        result: serde_json::Value,
        /// The final state.
        state: S,
    },
}

impl<S> Next<S> {
    /// Run `step` next.
    pub fn step(step: &'static str, state: S) -> Self {
        Next::Step { step, state }
    }

    /// Complete with `result`.
    pub fn complete(result: serde_json::Value, state: S) -> Self {
        Next::Complete { result, state }
    }
}

/// A step (or compensation) that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepError {
    /// Try again with the item's backoff; only the last attempt's failure
    /// fails the orchestration.
    Retry(String),
    /// Fail for good now: compensation starts (or, from a compensation,
    /// the orchestration ends `compensation_failed`).
    Fatal(String),
}

impl StepError {
    /// A retryable failure from any displayable error.
    pub fn retry(e: impl fmt::Display) -> Self {
        StepError::Retry(e.to_string())
    }

    /// A permanent failure from any displayable error.
    pub fn fatal(e: impl fmt::Display) -> Self {
        StepError::Fatal(e.to_string())
    }

    pub(crate) fn message(&self) -> &str {
        match self {
            StepError::Retry(m) | StepError::Fatal(m) => m,
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Retry(m) => write!(f, "retryable: {m}"),
            StepError::Fatal(m) => write!(f, "fatal: {m}"),
        }
    }
}

/// What a step returns.
pub type StepResult<S> = std::result::Result<Next<S>, StepError>;

/// What a step (or compensation) knows about its run.
#[derive(Debug, Clone)]
pub struct StepContext {
    pub(crate) job: JobContext,
    pub(crate) orchestration_id: Uuid,
    pub(crate) kind: String,
    pub(crate) step: String,
    pub(crate) version: i64,
    pub(crate) signal: Option<serde_json::Value>,
}

impl StepContext {
    /// The orchestration's id.
    pub fn orchestration_id(&self) -> Uuid {
        self.orchestration_id
    }

    /// Its tenant.
    pub fn tenant(&self) -> Uuid {
        self.job.tenant()
    }

    /// The orchestration type.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The step running (for a compensation, the step it undoes).
    pub fn step(&self) -> &str {
        &self.step
    }

    /// The record's version this run started from. It grows with every
    /// transition, so an effect written compare-and-set on
    /// `(orchestration_id, step, version)` is applied at most once per step.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The step item's attempt, from 1.
    pub fn attempt(&self) -> i32 {
        self.job.attempt()
    }

    /// The step item's fencing number (see [`JobContext::fencing_token`]).
    pub fn fencing_token(&self) -> i64 {
        self.job.fencing_token()
    }

    /// The payload of the signal that woke this step, if one did.
    pub fn signal(&self) -> Option<&serde_json::Value> {
        self.signal.as_ref()
    }

    /// The work item's context (cancellation, trace, …).
    pub fn job(&self) -> &JobContext {
        &self.job
    }
}

/// The strategies a workflow runner declares: how a failure is undone, and
/// how a crashed or parked orchestration carries on. `drover handlers`
/// prints them; a blank one is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowStrategy {
    /// What undoes the completed steps when one fails for good.
    pub compensation: &'static str,
    /// How a crashed, parked or stuck orchestration carries on.
    pub resume: &'static str,
}

pub(crate) type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub(crate) type ErasedNext = Next<serde_json::Value>;
type StepFn = Arc<
    dyn Fn(StepContext, serde_json::Value) -> BoxFut<std::result::Result<ErasedNext, StepError>>
        + Send
        + Sync,
>;
type CompFn = Arc<
    dyn Fn(StepContext, serde_json::Value) -> BoxFut<std::result::Result<(), StepError>>
        + Send
        + Sync,
>;

/// An orchestration type with its state type `S`: build it with
/// [`Workflow::new`], one [`Workflow::step`] per step.
pub struct Workflow<S> {
    pub(crate) name: String,
    pub(crate) lane: String,
    pub(crate) max_attempts: i32,
    pub(crate) strategy: Option<WorkflowStrategy>,
    pub(crate) first: Option<String>,
    pub(crate) steps: HashMap<String, StepFn>,
    pub(crate) order: Vec<String>,
    pub(crate) compensations: HashMap<String, CompFn>,
    pub(crate) errors: Vec<Error>,
    _state: PhantomData<fn() -> S>,
}

impl<S> fmt::Debug for Workflow<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workflow")
            .field("name", &self.name)
            .field("steps", &self.order)
            .finish_non_exhaustive()
    }
}

fn decode<S: DeserializeOwned>(v: serde_json::Value) -> std::result::Result<S, StepError> {
    serde_json::from_value(v).map_err(|e| StepError::Fatal(format!("state does not decode: {e}")))
}

fn encode<S: Serialize>(s: &S) -> std::result::Result<serde_json::Value, StepError> {
    serde_json::to_value(s).map_err(|e| StepError::Fatal(format!("state does not encode: {e}")))
}

impl<S> Workflow<S>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    /// A workflow named `name` (a kind-like name: `[a-z0-9_.:-]{1,128}`),
    /// its steps in lane `default` with 5 attempts each.
    pub fn new(name: impl Into<String>, strategy: WorkflowStrategy) -> Self {
        Workflow {
            name: name.into(),
            lane: "default".into(),
            max_attempts: 5,
            strategy: Some(strategy),
            first: None,
            steps: HashMap::new(),
            order: Vec::new(),
            compensations: HashMap::new(),
            errors: Vec::new(),
            _state: PhantomData,
        }
    }

    /// The lane its step items run in.
    pub fn lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = lane.into();
        self
    }

    /// Each step item's attempt budget.
    pub fn max_attempts(mut self, n: i32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Adds a step; the first one added is where a start begins.
    pub fn step<F, Fut>(mut self, name: &'static str, f: F) -> Self
    where
        F: Fn(StepContext, S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StepResult<S>> + Send + 'static,
    {
        if self.steps.contains_key(name) {
            self.errors.push(Error::Config(format!(
                "workflow {}: step {name} is declared twice",
                self.name
            )));
            return self;
        }
        let f = Arc::new(f);
        let erased: StepFn = Arc::new(move |cx, v| {
            let f = f.clone();
            Box::pin(async move {
                let s: S = decode(v)?;
                Ok(match f(cx, s).await? {
                    Next::Step { step, state } => Next::Step {
                        step,
                        state: encode(&state)?,
                    },
                    Next::ParkUntil { at, step, state } => Next::ParkUntil {
                        at,
                        step,
                        state: encode(&state)?,
                    },
                    Next::WaitSignal {
                        name,
                        step,
                        timeout,
                        on_timeout,
                        state,
                    } => Next::WaitSignal {
                        name,
                        step,
                        timeout,
                        on_timeout,
                        state: encode(&state)?,
                    },
                    Next::Complete { result, state } => Next::Complete {
                        result,
                        state: encode(&state)?,
                    },
                })
            })
        });
        if self.first.is_none() {
            self.first = Some(name.to_owned());
        }
        self.order.push(name.to_owned());
        self.steps.insert(name.to_owned(), erased);
        self
    }

    /// Adds the compensation of step `name`: it runs, with the state at the
    /// failure, when a later step fails for good or an operator cancels.
    ///
    /// It must tolerate "never applied": it also runs for step `name`
    /// itself when that step's outcome is unknown (its last attempt timed
    /// out, lost its lease or panicked, its item was cancelled, or a cancel
    /// request found it after an earlier attempt). Undo by the key the step
    /// would have written (`orchestration_id`, step, version); finding
    /// nothing to undo is success. Only steps with a compensation are
    /// listed as completed (see [`COMPLETED_CAP`](super::COMPLETED_CAP)).
    pub fn compensate<F, Fut>(mut self, name: &'static str, f: F) -> Self
    where
        F: Fn(StepContext, S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), StepError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let erased: CompFn = Arc::new(move |cx, v| {
            let f = f.clone();
            Box::pin(async move {
                let s: S = decode(v)?;
                f(cx, s).await
            })
        });
        self.compensations.insert(name.to_owned(), erased);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if let Some(e) = self.errors.first() {
            return Err(Error::Config(e.to_string()));
        }
        crate::item::validate_kind(&self.name)?;
        crate::item::validate_lane(&self.lane)?;
        let Some(s) = self.strategy else {
            return Err(Error::Config(format!(
                "workflow {} declares no strategy",
                self.name
            )));
        };
        for (what, v) in [("compensation", s.compensation), ("resume", s.resume)] {
            if v.trim().is_empty() {
                return Err(Error::Config(format!(
                    "workflow {} declares no {what} strategy",
                    self.name
                )));
            }
        }
        if self.first.is_none() {
            return Err(Error::Config(format!(
                "workflow {} has no steps",
                self.name
            )));
        }
        if let Some(c) = self
            .compensations
            .keys()
            .find(|c| !self.steps.contains_key(*c))
        {
            return Err(Error::Config(format!(
                "workflow {}: compensation of {c}, which is not a step",
                self.name
            )));
        }
        if self.max_attempts < 1 {
            return Err(Error::invalid("max_attempts", "must be at least 1"));
        }
        Ok(())
    }

    pub(crate) fn erase(self) -> ErasedWorkflow {
        ErasedWorkflow {
            name: self.name,
            first: self.first.unwrap_or_default(),
            lane: self.lane,
            max_attempts: self.max_attempts,
            strategy: self.strategy.unwrap_or(WorkflowStrategy {
                compensation: "",
                resume: "",
            }),
            steps: self.steps,
            compensations: self.compensations,
        }
    }
}

/// A workflow with its state type erased, as the runner holds it.
pub(crate) struct ErasedWorkflow {
    pub(crate) name: String,
    /// Its first step (where a start begins).
    pub(crate) first: String,
    /// The lane its step items run in.
    pub(crate) lane: String,
    /// Each step item's attempt budget.
    pub(crate) max_attempts: i32,
    pub(crate) strategy: WorkflowStrategy,
    pub(crate) steps: HashMap<String, StepFn>,
    pub(crate) compensations: HashMap<String, CompFn>,
}
