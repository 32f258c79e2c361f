//! Helpers for testing workflow steps without a worker, as
//! [`worker::testkit`](crate::worker::testkit) does for handlers: build the
//! [`StepContext`] a step item's run would make, and run a declared step
//! (or compensation) twice with the same state, as a redelivery after a
//! crash would, to check it is idempotent.
//!
//! ```
//! use drover::orchestration::testkit::{run_step_twice, step_context};
//! use drover::orchestration::{Next, StepContext, StepResult, Workflow, WorkflowStrategy};
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Checkout { order: u64, reserved: bool }
//!
//! async fn reserve(cx: StepContext, mut s: Checkout) -> StepResult<Checkout> {
//!     // Keyed by (orchestration, step, version): a rerun writes nothing new.
//!     let _key = (cx.orchestration_id(), cx.step(), cx.version());
//!     s.reserved = true;
//!     Ok(Next::step("charge", s))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> drover::Result<()> {
//! // A step written as a function: call it with a context.
//! let next = reserve(step_context("checkout", "reserve")?, Checkout { order: 7, reserved: false }).await;
//! assert!(matches!(next, Ok(Next::Step { step: "charge", .. })));
//!
//! // A step of the declared workflow, by name, twice.
//! let workflow = Workflow::new("checkout", WorkflowStrategy { compensation: "c", resume: "r" })
//!     .step("reserve", reserve)
//!     .step("charge", |_cx, s: Checkout| async move { Ok(Next::complete(serde_json::json!({}), s)) });
//! let (first, second) =
//!     run_step_twice(&workflow, "reserve", &Checkout { order: 7, reserved: false }).await?;
//! assert_eq!(first, second);
//! # Ok(()) }
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::transition::StepJob;
use super::workflow::{Next, StepContext, StepError, StepResult, Workflow};
use crate::error::{Error, Result};

/// What a step item's run knows besides the workflow and the step: the
/// orchestration, its tenant, the record's version, the attempt and the
/// signal that woke it. [`StepRun::default`] is a first attempt of a fresh
/// orchestration at version 1 in the nil tenant, woken by no signal.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRun {
    /// The orchestration's id.
    pub orchestration_id: Uuid,
    /// Its tenant.
    pub tenant: Uuid,
    /// The record's version the run starts from.
    pub version: i64,
    /// The step item's attempt, from 1.
    pub attempt: i32,
    /// The payload of the signal that woke the step, if one did.
    pub signal: Option<serde_json::Value>,
}

impl Default for StepRun {
    fn default() -> Self {
        StepRun {
            orchestration_id: Uuid::now_v7(),
            tenant: Uuid::nil(),
            version: 1,
            attempt: 1,
            signal: None,
        }
    }
}

impl StepRun {
    /// The context of step `step` of workflow `workflow` in this run, with
    /// fencing token `claim_seq`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `attempt` is below 1.
    pub fn context_with_token(
        &self,
        workflow: &str,
        step: &str,
        claim_seq: i64,
    ) -> Result<StepContext> {
        if self.attempt < 1 {
            return Err(Error::invalid("attempt", "must be at least 1"));
        }
        let job = StepJob {
            orchestration_id: self.orchestration_id,
            version: self.version,
            signal: self.signal.clone(),
        };
        let cx = crate::worker::testkit::context_for(
            &job,
            Uuid::now_v7(),
            self.tenant,
            Uuid::nil(),
            self.attempt,
            claim_seq,
        )?;
        Ok(StepContext {
            job: cx,
            orchestration_id: self.orchestration_id,
            kind: workflow.to_owned(),
            step: step.to_owned(),
            version: self.version,
            signal: self.signal.clone(),
        })
    }

    /// The context of step `step` of workflow `workflow` in this run.
    ///
    /// # Errors
    /// As [`StepRun::context_with_token`].
    pub fn context(&self, workflow: &str, step: &str) -> Result<StepContext> {
        self.context_with_token(workflow, step, 1)
    }
}

/// The context a step item's first run of step `step` of workflow
/// `workflow` would make ([`StepRun::default`]).
///
/// # Errors
/// None in practice; the signature follows [`StepRun::context`].
pub fn step_context(workflow: &str, step: &str) -> Result<StepContext> {
    StepRun::default().context(workflow, step)
}

/// Runs step `step` of `workflow` once, with `state`, in `run`.
///
/// # Errors
/// [`Error::InvalidInput`] on `step` when the workflow declares no such
/// step; on `state` when it does not serialize.
pub async fn run_step<S>(
    workflow: &Workflow<S>,
    step: &str,
    state: &S,
    run: &StepRun,
) -> Result<StepResult<S>>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    run_step_token(workflow, step, state, run, 1).await
}

/// Runs step `step` of `workflow` twice with the same state and version, as
/// a redelivery after a crash before its transition landed would: the
/// second run has the next fencing token. Returns both results; assert that
/// the step's effects happened once.
///
/// # Errors
/// As [`run_step`].
pub async fn run_step_twice<S>(
    workflow: &Workflow<S>,
    step: &str,
    state: &S,
) -> Result<(StepResult<S>, StepResult<S>)>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    let run = StepRun::default();
    let first = run_step_token(workflow, step, state, &run, 1).await?;
    let second = run_step_token(workflow, step, state, &run, 2).await?;
    Ok((first, second))
}

/// Runs the compensation of step `step` of `workflow` twice with the same
/// state, as a rerun after a crash would (a compensation must also tolerate
/// the step never having applied). Returns both results.
///
/// # Errors
/// [`Error::InvalidInput`] on `step` when the workflow declares no
/// compensation for it; on `state` when it does not serialize.
pub async fn run_compensation_twice<S>(
    workflow: &Workflow<S>,
    step: &str,
    state: &S,
) -> Result<(
    std::result::Result<(), StepError>,
    std::result::Result<(), StepError>,
)>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    let Some(comp) = workflow.compensations.get(step).cloned() else {
        return Err(Error::invalid(
            "step",
            format!(
                "workflow {} declares no compensation of {step:?}",
                workflow.name
            ),
        ));
    };
    let state = encode(state)?;
    let run = StepRun::default();
    let first = comp(
        run.context_with_token(&workflow.name, step, 1)?,
        state.clone(),
    )
    .await;
    let second = comp(run.context_with_token(&workflow.name, step, 2)?, state).await;
    Ok((first, second))
}

async fn run_step_token<S>(
    workflow: &Workflow<S>,
    step: &str,
    state: &S,
    run: &StepRun,
    claim_seq: i64,
) -> Result<StepResult<S>>
where
    S: Serialize + DeserializeOwned + Send + 'static,
{
    let Some(f) = workflow.steps.get(step).cloned() else {
        return Err(Error::invalid(
            "step",
            format!("workflow {} declares no step {step:?}", workflow.name),
        ));
    };
    let cx = run.context_with_token(&workflow.name, step, claim_seq)?;
    Ok(match f(cx, encode(state)?).await {
        Ok(next) => Ok(typed(next)?),
        Err(e) => Err(e),
    })
}

fn encode<S: Serialize>(state: &S) -> Result<serde_json::Value> {
    serde_json::to_value(state)
        .map_err(|e| Error::invalid("state", format!("does not serialize: {e}")))
}

/// The erased step's answer with its state decoded back to `S`.
fn typed<S: DeserializeOwned>(next: Next<serde_json::Value>) -> Result<Next<S>> {
    let decode = |v: serde_json::Value| -> Result<S> {
        serde_json::from_value(v)
            .map_err(|e| Error::invalid("state", format!("does not decode: {e}")))
    };
    Ok(match next {
        Next::Step { step, state } => Next::Step {
            step,
            state: decode(state)?,
        },
        Next::ParkUntil { at, step, state } => Next::ParkUntil {
            at,
            step,
            state: decode(state)?,
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
            state: decode(state)?,
        },
        Next::Complete { result, state } => Next::Complete {
            result,
            state: decode(state)?,
        },
    })
}
