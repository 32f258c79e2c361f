//! Orchestrations: long-running work as persisted steps that park, resume,
//! and compensate in reverse.
//!
//! | part | owns |
//! |---|---|
//! | [`record`](Orchestration) | the record, its signals, [`OrchestrationStore`] |
//! | [`workflow`](Workflow) | orchestration types declared in code: steps, compensations, strategies |
//! | `runner` | the `drover.step` handler that runs one step per work item |
//! | [`testkit`] | a [`StepContext`] for unit tests, and a declared step or compensation run twice |
//! | [`transition`] | the pure transitions the backends share (wake-ups, step items) |
//! | [`ResumeParked`] | the sweep step: resumes due parks, times out signal waits, repairs dead or cancelled step items, purges finished records, sets `drover_records_parked` |
//! | this module | building a [`Start`] from a [`Workflow`], the sweep step, the runner's wiring; [`Start`] itself and the producer API on [`Queue`] (start, signal, cancel, resume, read) live in `queue/orchestration.rs` |
//!
//! Invariants: an orchestration's record changes only by a compare-and-set
//! on its version; a step's transition lands in the transaction that
//! completes the step's work item, or not at all; a signal is never lost
//! between a park and its arrival; a finished record takes no signal and no
//! transition; an operator's cancel never discards a step in flight (it is
//! a request the step's own transition honours); signal, cancel and resume
//! need the operate permission. The model and its state machine:
//! `docs/orchestrations.md`.

use std::future::Future;
use std::pin::Pin;

use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::maintenance::SweepStep;
use crate::queue::Queue;
use crate::worker::WorkerBuilder;

mod runner;
pub mod testkit;
mod workflow;

pub use crate::queue::orchestration::Start;
pub(crate) use crate::queue::orchestration::count_step_item;
pub use crate::store::orchestration::transition;
pub use crate::store::orchestration::{
    COMPLETED_CAP, DeadStep, HISTORY_CAP, HistoryEntry, NewOrchestration, Orchestration,
    OrchestrationFilter, OrchestrationInserted, OrchestrationStatus, OrchestrationStore,
    RecordWrite, Signal, SignalOutcome, Transition,
};
pub use runner::{UNKNOWN_KIND_SNOOZE, Workflows};
pub use transition::{STEP_KIND, StepJob};
pub use workflow::{Next, StepContext, StepError, StepResult, Workflow, WorkflowStrategy};

// A step's item is a work item of the built-in kind: the queue's trait is
// implemented here, above the store that defines the payload.
impl crate::queue::Kind for StepJob {
    const NAME: &'static str = STEP_KIND;
}

/// How many due parks one sweep resumes by default.
pub const RESUME_LIMIT_DEFAULT: u32 = 1000;
/// How many finished records (and, separately, consumed signals) one sweep
/// purges by default.
pub const PURGE_LIMIT_DEFAULT: u32 = 1000;

// `Start` is the queue's (its producer API takes one); building one from a
// declared workflow is this module's, which knows workflows.
impl Start {
    /// A start of `workflow` with `state` in the nil tenant.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `state` if it does not serialize.
    pub fn of<S: Serialize + serde::de::DeserializeOwned + Send + 'static>(
        workflow: &Workflow<S>,
        state: &S,
    ) -> Result<Start> {
        let state = serde_json::to_value(state)
            .map_err(|e| Error::invalid("state", format!("does not serialize: {e}")))?;
        Ok(Start {
            kind: workflow.name.clone(),
            tenant_id: Uuid::nil(),
            state,
            first_step: workflow.first.clone().unwrap_or_default(),
            lane: workflow.lane.clone(),
            max_attempts: workflow.max_attempts,
            idempotency_key: None,
        })
    }
}

/// The sweep step: resumes parked orchestrations whose time has come (a
/// signal wait past its timeout runs its timeout step), takes the failure
/// path for records whose step item was dead-lettered behind the runner's
/// back or cancelled through the item API ([`ResumeParked::fail_dead_steps`]),
/// purges finished records and consumed signals past `retention`, and sets
/// `drover_records_parked` (parked, stuck and stranded records).
#[derive(Debug, Clone)]
pub struct ResumeParked {
    /// At most this many per sweep. Default [`RESUME_LIMIT_DEFAULT`].
    pub limit: u32,
    /// Finished records (with their signals) last written longer ago, and
    /// signals consumed longer ago, are purged. Default: the items'
    /// [`ITEM_RETENTION_DEFAULT`](crate::maintenance::ITEM_RETENTION_DEFAULT).
    pub retention: Duration,
    /// At most this many finished records (and as many consumed signals)
    /// purged per sweep. Default [`PURGE_LIMIT_DEFAULT`].
    pub purge_limit: u32,
}

impl Default for ResumeParked {
    fn default() -> Self {
        ResumeParked {
            limit: RESUME_LIMIT_DEFAULT,
            retention: crate::maintenance::ITEM_RETENTION_DEFAULT,
            purge_limit: PURGE_LIMIT_DEFAULT,
        }
    }
}

impl ResumeParked {
    /// Runs once: how many records it resumed.
    ///
    /// # Errors
    /// Storage errors of the listing; a resume that lost a race (a signal
    /// landed first) is not an error.
    pub async fn run_once(&self, queue: &Queue) -> Result<u64> {
        let store = queue.store();
        let now = store.now();
        let mut resumed = 0u64;
        for rec in store.orchestration_due(self.limit).await? {
            match store
                .orchestration_update(&transition::resume_due(&rec, now))
                .await
            {
                Ok(after) => {
                    count_step_item(&after);
                    resumed += 1;
                }
                Err(e) if e.is_conflict() => {
                    tracing::debug!(orchestration = %rec.id, "resume lost a race; the record moved on");
                }
                Err(e) => return Err(e),
            }
        }
        resumed += self.fail_dead_steps(queue).await?;
        let parked = store.orchestration_parked_count().await?;
        metrics::gauge!("drover_records_parked").set(parked as f64);
        let before = now - crate::rules::to_chrono(self.retention);
        let purged = store.orchestration_purge(before, self.purge_limit).await?;
        if purged > 0 {
            tracing::info!(
                purged,
                "purged finished orchestrations and consumed signals"
            );
        }
        Ok(resumed)
    }
}

impl ResumeParked {
    /// Takes the failure path for live records whose current step's item
    /// was dead-lettered without a transition (a last attempt that timed
    /// out, a lease that expired with no attempt left): compensation in
    /// reverse, or `compensation_failed` for a compensation, exactly as a
    /// final error returned by the step. How many records it moved.
    ///
    /// # Errors
    /// Storage errors of the listing; a write that lost a race is not one.
    pub async fn fail_dead_steps(&self, queue: &Queue) -> Result<u64> {
        let store = queue.store();
        let mut moved = 0u64;
        for dead in store.orchestration_dead_steps(self.limit).await? {
            match store.orchestration_update(&runner::dead_step(&dead)).await {
                Ok(after) => {
                    count_step_item(&after);
                    moved += 1;
                    tracing::warn!(orchestration = %after.id, kind = %after.kind, status = %after.status,
                        error = ?dead.error, "a step's item was dead-lettered: the orchestration takes the failure path");
                    if after.status == OrchestrationStatus::CompensationFailed {
                        metrics::counter!("drover_orchestrations_compensation_failed_total")
                            .increment(1);
                    }
                }
                Err(e) if e.is_conflict() => {
                    tracing::debug!(orchestration = %dead.record.id, "dead step lost a race; the record moved on");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(moved)
    }
}

impl SweepStep for ResumeParked {
    fn name(&self) -> &str {
        "resume_parked"
    }

    fn run<'a>(
        &'a self,
        queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>> {
        Box::pin(self.run_once(queue))
    }
}

impl WorkerBuilder {
    /// Adds the workflow runner: the `drover.step` handler for `workflows`,
    /// the sweep step that resumes parked ones, and the workflows' declared
    /// strategies for `drover handlers`; declares them on the builder's
    /// queue, so a [`Start::new`] by name starts them from any clone of it.
    /// Each workflow's lane is work this worker creates for itself (its
    /// step items): [`build`](WorkerBuilder::build) refuses a worker that
    /// neither drains it nor is told another worker does.
    pub fn workflows(self, workflows: Workflows) -> Self {
        let roles: Vec<crate::worker::RoleInfo> = workflows
            .strategies()
            .into_iter()
            .map(|(name, s)| crate::worker::RoleInfo {
                role: "workflow runner".into(),
                name,
                strategies: vec![
                    (
                        "idempotency".into(),
                        runner::STEP_STRATEGY.idempotency.to_owned(),
                    ),
                    ("retry".into(), runner::STEP_STRATEGY.retry.to_owned()),
                    (
                        "checkpoint".into(),
                        runner::STEP_STRATEGY.checkpoint.to_owned(),
                    ),
                    ("recovery".into(), runner::STEP_STRATEGY.recovery.to_owned()),
                    ("compensation".into(), s.compensation.to_owned()),
                    ("resume".into(), s.resume.to_owned()),
                ],
            })
            .collect();
        let check = workflows.check();
        let queue = self.queue().clone();
        workflows.declare(&queue);
        let lanes = workflows.lanes();
        let mut b = self
            .handler(runner::StepRunner { workflows, queue })
            .sweep_step(Box::new(ResumeParked::default()));
        for r in roles {
            b = b.role(r);
        }
        for (name, lane) in lanes {
            b = b.writes_to(
                &lane,
                format!("workflow {name}'s step items (Workflow::lane)"),
            );
        }
        if let Err(e) = check {
            b = b.error(e);
        }
        b
    }
}
