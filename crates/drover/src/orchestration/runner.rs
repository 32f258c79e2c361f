//! The workflow runner: the handler of the built-in `drover.step` kind.
//!
//! Each step of each orchestration runs as one work item, so claim, lease,
//! retries, fencing and the worker's capacity apply to it. A run reads the
//! record, checks the item is not stale (the record's version and status
//! are the ones the item was made for), runs the step, and writes the
//! transition with [`OrchestrationStore::orchestration_advance`]: the item's
//! fenced completion and the record's compare-and-set in one transaction.
//!
//! Invariants:
//! - A stale item (an earlier version, a finished record, a racing worker
//!   that landed first) changes nothing but its own completion.
//! - Only a step's last attempt (or a fatal error) fails the orchestration;
//!   earlier failures are retried with the item's backoff.
//! - A step the code does not declare parks the record as `stuck`; it never
//!   crashes the worker and never guesses a step.
//! - A step whose effect may or may not have applied (its last attempt
//!   panicked, timed out or lost its lease, its item was cancelled, or a
//!   cancel request found it after an earlier attempt) counts as
//!   completed for compensation: its own compensation runs first, so
//!   compensations must tolerate "never applied". A step that answers
//!   with an error is taken at its word: it left no effect.
//! - A cancel request found before the step runs starts compensation
//!   without running it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::transition::{StepJob, begin_compensation, transition};
use super::workflow::{ErasedWorkflow, Next, StepContext, StepError, Workflow, WorkflowStrategy};
use crate::error::{Error, Result};
use crate::queue::JobContext;
use crate::store::orchestration::{
    COMPLETED_CAP, HistoryEntry, Orchestration, OrchestrationStatus, RecordWrite, Transition,
};
use crate::worker::{Done, Handler, JobError, Outcome, Strategy};

/// How long an item of a workflow this worker does not know is snoozed
/// (another worker, or the next deploy, may know it).
pub const UNKNOWN_KIND_SNOOZE: Duration = Duration::from_secs(5);

/// The workflows a worker runs: add each with [`Workflows::with`], then
/// hand the set to [`WorkerBuilder::workflows`](crate::worker::WorkerBuilder::workflows).
#[derive(Default, Clone)]
pub struct Workflows {
    pub(crate) defs: BTreeMap<String, Arc<ErasedWorkflow>>,
    pub(crate) errors: Vec<String>,
}

impl std::fmt::Debug for Workflows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.defs.keys()).finish()
    }
}

impl Workflows {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a workflow (checked: a blank strategy, no steps or a duplicate
    /// name make the worker refuse to build).
    pub fn with<S>(mut self, w: Workflow<S>) -> Self
    where
        S: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        if let Err(e) = w.check() {
            self.errors.push(e.to_string());
            return self;
        }
        if self.defs.contains_key(&w.name) {
            self.errors
                .push(format!("workflow {} is added twice", w.name));
            return self;
        }
        let w = w.erase();
        self.defs.insert(w.name.clone(), Arc::new(w));
        self
    }

    /// Declares every workflow of the set on `queue` (and its clones), so a
    /// [`Start::new`](crate::orchestration::Start::new) names it there. A
    /// worker built with [`WorkerBuilder::workflows`](crate::worker::WorkerBuilder::workflows)
    /// declares them on its queue already; a process that only starts
    /// orchestrations (no worker) calls this once.
    pub fn declare(&self, queue: &crate::Queue) {
        for w in self.defs.values() {
            queue.declare_workflow(
                &w.name,
                crate::queue::orchestration::DeclaredWorkflow {
                    first_step: w.first.clone(),
                    lane: w.lane.clone(),
                    max_attempts: w.max_attempts,
                },
            );
        }
    }

    /// Each workflow's name and declared strategy, sorted by name.
    pub fn strategies(&self) -> Vec<(String, WorkflowStrategy)> {
        self.defs
            .iter()
            .map(|(n, w)| (n.clone(), w.strategy))
            .collect()
    }

    /// Each workflow's name and the lane its step items run in, sorted by
    /// name.
    pub fn lanes(&self) -> Vec<(String, String)> {
        self.defs
            .iter()
            .map(|(n, w)| (n.clone(), w.lane.clone()))
            .collect()
    }

    /// The first problem found while adding workflows.
    ///
    /// # Errors
    /// [`Error::Config`] naming it.
    pub fn check(&self) -> Result<()> {
        match self.errors.first() {
            Some(e) => Err(Error::Config(e.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn get(&self, kind: &str) -> Option<&Arc<ErasedWorkflow>> {
        self.defs.get(kind)
    }
}

/// The handler of `drover.step`.
pub(crate) struct StepRunner {
    pub(crate) workflows: Workflows,
    pub(crate) queue: crate::Queue,
}

impl Handler for StepRunner {
    type Job = StepJob;
    const STRATEGY: Strategy = STEP_STRATEGY;

    async fn handle(&self, cx: &JobContext, job: StepJob) -> Outcome {
        run_step(self, cx, job).await
    }
}

/// The four strategies every workflow runner keeps (its `drover.step`
/// handler's, listed again on each workflow's role).
pub(crate) const STEP_STRATEGY: Strategy = Strategy {
    idempotency: "each transition is a compare-and-set on the record's version, written in the transaction that completes the step's item; a stale item changes nothing",
    retry: "a step's retryable error uses the item's backoff; only its last attempt fails the orchestration (compensation in reverse)",
    checkpoint: "the record is the checkpoint: its current step, state and version are committed with each step's item, so a rerun resumes at the last committed step",
    recovery: "a crashed step's item is swept and runs again against the same version; parked records are resumed by the sweep; a step item dead-lettered or cancelled behind the runner's back takes the failure path from the sweep",
};

fn entry(
    step: &str,
    cx: &JobContext,
    started: chrono::DateTime<Utc>,
    outcome: String,
) -> HistoryEntry {
    entry_at(step, cx.attempt(), started, outcome)
}

fn entry_at(
    step: &str,
    attempt: i32,
    started: chrono::DateTime<Utc>,
    outcome: String,
) -> HistoryEntry {
    HistoryEntry {
        step: step.to_owned(),
        attempt,
        started,
        ended: Utc::now(),
        outcome,
    }
}

async fn run_step(r: &StepRunner, cx: &JobContext, job: StepJob) -> Outcome {
    let store = r.queue.store();
    let rec = store
        .orchestration_get(cx.tenant(), job.orchestration_id)
        .await
        .map_err(JobError::retry)?
        .ok_or_else(|| JobError::Fatal(format!("no orchestration {}", job.orchestration_id)))?;
    let live = matches!(
        rec.status,
        OrchestrationStatus::Running | OrchestrationStatus::Compensating
    );
    if rec.version != job.version || !live {
        tracing::debug!(orchestration = %rec.id, item_version = job.version, version = rec.version,
            status = %rec.status, "stale step item: the record has moved on");
        return Ok(Done::Completed);
    }
    let Some(def) = r.workflows.get(&rec.kind).cloned() else {
        tracing::warn!(orchestration = %rec.id, kind = %rec.kind, "no workflow of this kind on this worker; snoozed");
        return Err(JobError::Snooze(UNKNOWN_KIND_SNOOZE));
    };
    let scx = StepContext {
        job: cx.clone(),
        orchestration_id: rec.id,
        kind: rec.kind.clone(),
        step: rec.step.clone(),
        version: rec.version,
        signal: job.signal.clone(),
    };
    let started = Utc::now();
    let last_attempt = cx.attempt() >= cx.max_attempts();
    let t = if rec.status == OrchestrationStatus::Running {
        let Some(step) = def.steps.get(&rec.step).cloned() else {
            return settle(r, cx, &rec, stuck(&rec, cx, started)).await;
        };
        let compensable = def.compensations.contains_key(&rec.step);
        if rec.cancel_requested {
            // Not run: an earlier attempt of it may have applied (it ended
            // without an answer, or with a retry), so it is undone too.
            let maybe = compensable && cx.attempt() > 1;
            start_compensation(&rec, cx.attempt(), started, "not run", maybe, true)
        } else {
            match guarded(step(scx, rec.state.clone())).await {
                Ok(next) => forward(&rec, cx, started, next, compensable),
                Err((StepError::Retry(m), _)) if !last_attempt => return Err(JobError::Retry(m)),
                Err((e, panicked)) => start_compensation(
                    &rec,
                    cx.attempt(),
                    started,
                    e.message(),
                    panicked && compensable,
                    false,
                ),
            }
        }
    } else {
        if !def.steps.contains_key(&rec.step) {
            return settle(r, cx, &rec, stuck(&rec, cx, started)).await;
        }
        match def.compensations.get(&rec.step).cloned() {
            Some(comp) => match guarded(comp(scx, rec.state.clone())).await {
                Ok(()) => compensated_one(&rec, &def, cx, started),
                Err((StepError::Retry(m), _)) if !last_attempt => return Err(JobError::Retry(m)),
                Err((e, _)) => compensation_failed(&rec, cx.attempt(), started, e.message()),
            },
            // Entered by an operator's cancel or the sweep, which do not
            // know the code: steps without a compensation are skipped here.
            None => compensated_one(&rec, &def, cx, started),
        }
    };
    settle(r, cx, &rec, t).await
}

/// Runs a step or compensation, turning a panic into a retryable error: a
/// panic on the last attempt then fails the orchestration into
/// compensation instead of dead-lettering its item behind its back. The
/// flag is true for a panic (its effect may have applied).
async fn guarded<T>(
    f: impl std::future::Future<Output = std::result::Result<T, StepError>>,
) -> std::result::Result<T, (StepError, bool)> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(f).catch_unwind().await {
        Ok(r) => r.map_err(|e| (e, false)),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            tracing::error!(panic = %msg, "orchestration step panicked");
            Err((StepError::Retry(format!("step panicked: {msg}")), true))
        }
    }
}

/// Writes `t` with the item's completion; a lost race completes nothing more.
async fn settle(r: &StepRunner, cx: &JobContext, rec: &Orchestration, t: Transition) -> Outcome {
    match r.queue.store().orchestration_advance(cx.claim(), &t).await {
        Ok(after) => {
            super::count_step_item(&after);
            match after.status {
                OrchestrationStatus::CompensationFailed => {
                    metrics::counter!("drover_orchestrations_compensation_failed_total")
                        .increment(1);
                    tracing::error!(orchestration = %after.id, kind = %after.kind, error = ?after.error,
                        "compensation failed for good: the orchestration needs an operator");
                }
                OrchestrationStatus::Stuck => {
                    tracing::error!(orchestration = %after.id, kind = %after.kind, error = ?after.error,
                        "orchestration stuck");
                }
                s => {
                    tracing::debug!(orchestration = %after.id, status = %s, step = %after.step, "transition landed")
                }
            }
            Ok(Done::Settled)
        }
        Err(e) if e.is_conflict() => {
            // The item's claim or the record's version moved: either way
            // this run's transition must not land, and it did not.
            tracing::info!(orchestration = %rec.id, error = %e, "transition refused: a stale step changed nothing");
            Ok(Done::Completed)
        }
        Err(e) => Err(JobError::retry(e)),
    }
}

fn base(rec: &Orchestration) -> RecordWrite {
    let mut w = RecordWrite::of(rec);
    w.parked_until = None;
    w.waiting_for = None;
    w.timeout_step = None;
    w
}

fn forward(
    rec: &Orchestration,
    cx: &JobContext,
    started: chrono::DateTime<Utc>,
    next: Next<serde_json::Value>,
    compensable: bool,
) -> Transition {
    let mut w = base(rec);
    if compensable {
        if w.completed.len() >= COMPLETED_CAP {
            // Compensation must know every step to undo, so the list is not
            // trimmed: the orchestration fails (and undoes them all) instead.
            let why = format!("more than {COMPLETED_CAP} compensable steps completed");
            return start_compensation(rec, cx.attempt(), started, &why, true, false);
        }
        w.completed.push(rec.step.clone());
    }
    let enqueue = match next {
        Next::Step { step, state } => {
            w.push_history(entry(&rec.step, cx, started, format!("next:{step}")));
            w.step = step.to_owned();
            w.state = state;
            true
        }
        Next::ParkUntil { at, step, state } => {
            w.push_history(entry(
                &rec.step,
                cx,
                started,
                format!("parked_until {at}: next {step}"),
            ));
            w.status = OrchestrationStatus::Parked;
            w.parked_until = Some(at);
            w.step = step.to_owned();
            w.state = state;
            false
        }
        Next::WaitSignal {
            name,
            step,
            timeout,
            on_timeout,
            state,
        } => {
            w.push_history(entry(
                &rec.step,
                cx,
                started,
                format!("waiting_for {name}: next {step}, on timeout {on_timeout}"),
            ));
            w.status = OrchestrationStatus::Parked;
            w.parked_until = Some(Utc::now() + crate::rules::to_chrono(timeout));
            w.waiting_for = Some(name.to_owned());
            w.timeout_step = Some(on_timeout.to_owned());
            w.step = step.to_owned();
            w.state = state;
            false
        }
        Next::Complete { result, state } => {
            w.push_history(entry(&rec.step, cx, started, "completed".into()));
            w.status = OrchestrationStatus::Completed;
            w.result = Some(result);
            w.state = state;
            false
        }
    };
    transition(rec, w, enqueue)
}

/// The failure path of the current step: compensation of the completed
/// steps, newest first. With `maybe_applied` the step itself is listed
/// first (its effect may have applied; its compensation tolerates it not
/// having). With `cancel` it ends `cancelled` (an operator's request).
fn start_compensation(
    rec: &Orchestration,
    attempt: i32,
    started: chrono::DateTime<Utc>,
    error: &str,
    maybe_applied: bool,
    cancel: bool,
) -> Transition {
    let mut w = base(rec);
    let (outcome, why) = if cancel {
        (
            format!("cancelled by an operator: {error}"),
            "cancelled by an operator".to_owned(),
        )
    } else {
        (
            format!("failed: {error}"),
            format!("step {} failed: {error}", rec.step),
        )
    };
    w.push_history(entry_at(&rec.step, attempt, started, outcome));
    if maybe_applied && w.completed.last() != Some(&rec.step) {
        w.completed.push(rec.step.clone());
    }
    begin_compensation(rec, w, why, cancel || rec.cancel_requested)
}

fn compensated_one(
    rec: &Orchestration,
    def: &ErasedWorkflow,
    cx: &JobContext,
    started: chrono::DateTime<Utc>,
) -> Transition {
    let mut w = base(rec);
    let had = def.compensations.contains_key(&rec.step);
    w.push_history(entry(
        &rec.step,
        cx,
        started,
        if had {
            "compensated".into()
        } else {
            "no compensation".into()
        },
    ));
    // The step just compensated is the newest completed one.
    if w.completed.last() == Some(&rec.step) {
        w.completed.pop();
    }
    match w.completed.last().cloned() {
        Some(prev) => {
            w.step = prev;
            transition(rec, w, true)
        }
        None => {
            w.status = if rec.cancel_requested {
                OrchestrationStatus::Cancelled
            } else {
                OrchestrationStatus::Compensated
            };
            transition(rec, w, false)
        }
    }
}

fn compensation_failed(
    rec: &Orchestration,
    attempt: i32,
    started: chrono::DateTime<Utc>,
    error: &str,
) -> Transition {
    let mut w = base(rec);
    w.push_history(entry_at(
        &rec.step,
        attempt,
        started,
        format!("compensation failed: {error}"),
    ));
    w.status = OrchestrationStatus::CompensationFailed;
    w.error = Some(format!("compensation of {} failed: {error}", rec.step));
    transition(rec, w, false)
}

/// The failure path for a live record whose current step's item is in the
/// dead letter, or was cancelled, without the runner having written a
/// transition (its last attempt timed out, its lease expired with no
/// attempt left, an operator cancelled the item). The step may or may not
/// have applied, so it is compensated too (the sweep does not know the
/// code: a step without a compensation is skipped when its turn comes).
///
/// - `running`, failed item: compensation, as a final error would start.
/// - `running`, cancelled item: the operator's cancel of the orchestration,
///   compensating and ending `cancelled`.
/// - `compensating`, failed item: `compensation_failed`.
/// - `compensating`, cancelled item: `stuck`, so `drover orchestrations
///   resume` runs the compensation again once the operator means it.
pub(crate) fn dead_step(dead: &crate::store::orchestration::DeadStep) -> Transition {
    let rec = &dead.record;
    let why = dead.error.as_deref().unwrap_or("dead-lettered");
    let why = if dead.cancelled {
        format!("its item was cancelled after {} attempts", dead.attempts)
    } else {
        format!(
            "its item was dead-lettered after {} attempts: {why}",
            dead.attempts
        )
    };
    match (rec.status, dead.cancelled) {
        (OrchestrationStatus::Compensating, false) => {
            compensation_failed(rec, dead.attempts, dead.failed_at, &why)
        }
        (OrchestrationStatus::Compensating, true) => {
            let mut w = base(rec);
            w.push_history(entry_at(
                &rec.step,
                dead.attempts,
                dead.failed_at,
                format!("stuck: {why}"),
            ));
            w.status = OrchestrationStatus::Stuck;
            w.resume_as = Some(OrchestrationStatus::Compensating);
            w.error = Some(format!(
                "the compensation of {} was cancelled ({why}); `drover orchestrations resume {}` runs it again",
                rec.step, rec.id
            ));
            transition(rec, w, false)
        }
        (_, cancelled) => {
            start_compensation(rec, dead.attempts, dead.failed_at, &why, true, cancelled)
        }
    }
}

fn stuck(rec: &Orchestration, cx: &JobContext, started: chrono::DateTime<Utc>) -> Transition {
    let mut w = base(rec);
    let why = format!(
        "step {:?} is not declared by workflow {} in the deployed code; fix the code, then `drover orchestrations resume {}`",
        rec.step, rec.kind, rec.id
    );
    w.push_history(entry(&rec.step, cx, started, "stuck: unknown step".into()));
    w.status = OrchestrationStatus::Stuck;
    w.resume_as = Some(rec.status);
    w.error = Some(why);
    transition(rec, w, false)
}
