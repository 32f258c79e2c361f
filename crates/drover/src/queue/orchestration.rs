//! Orchestrations as the queue's API drives them: what a start is
//! ([`Start`], checked into a record and its first step item), start (in a
//! transaction of its own or the caller's), read, signal, cancel and
//! resume, and the count of the step items a landed transition inserts.
//! The record and its transitions are the store's
//! (`crate::store::orchestration`); workflows, the runner and the sweep
//! step are [`crate::orchestration`]'s, which re-exports [`Start`].
//!
//! Invariants: signal, cancel and resume need the operate permission on the
//! tenant ([`Queue::check_operator`]); an operator's cancel never discards
//! a step in flight (it is a request the step's own transition honours);
//! every landed transition that inserts a step item counts it once.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::Utc;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{InsertResult, NewItem};
use crate::queue::{Principal, Queue};
use crate::store::orchestration::transition::{self, STEP_KIND};
use crate::store::orchestration::{
    HistoryEntry, NewOrchestration, Orchestration, OrchestrationFilter, OrchestrationInserted,
    OrchestrationStatus, RecordWrite, Signal, SignalOutcome, Transition,
};

/// How many times an operator's cancel re-reads a record that moved under
/// it before giving up with `Conflict`.
pub(crate) const CANCEL_TRIES: u32 = 5;

/// Counts the step item a landed transition inserted: every transition
/// that leaves a record `running` or `compensating` inserts exactly one
/// (a wake-up or cancel folded into it replaces the first one's), and no
/// other does. Same labels as a direct enqueue.
pub(crate) fn count_step_item(r: &Orchestration) {
    if matches!(
        r.status,
        OrchestrationStatus::Running | OrchestrationStatus::Compensating
    ) {
        crate::queue::counters::count("drover_enqueued_total", &r.lane, STEP_KIND, 1);
    }
}

/// What a start by name needs of a declared workflow: where it begins and
/// where its step items run. Kept on the queue, by workflow name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeclaredWorkflow {
    /// Its first declared step.
    pub(crate) first_step: String,
    /// The lane its step items run in.
    pub(crate) lane: String,
    /// Each step item's attempt budget.
    pub(crate) max_attempts: i32,
}

/// The workflows declared on a queue (and its clones), by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeclaredWorkflows(Arc<RwLock<HashMap<String, DeclaredWorkflow>>>);

/// How to start an orchestration: [`Start::new`] names a workflow the
/// queue knows (declared by a worker built over it, or by
/// [`Workflows::declare`](crate::orchestration::Workflows::declare));
/// [`Start::of`](crate::orchestration::Start::of) takes the workflow value.
#[derive(Debug, Clone)]
pub struct Start {
    /// The workflow's name.
    pub kind: String,
    /// The tenant (nil in single-tenant use).
    pub tenant_id: Uuid,
    /// The initial state, as JSON.
    pub state: serde_json::Value,
    /// The first step (the workflow's first declared step, by name); empty:
    /// the declared workflow's, looked up by the queue at start.
    pub first_step: String,
    /// The lane its step items run in; empty: the declared workflow's.
    pub lane: String,
    /// Each step item's attempt budget; 0: the declared workflow's.
    pub max_attempts: i32,
    /// A retried start with the same key meets its own orchestration.
    pub idempotency_key: Option<String>,
}

impl Start {
    /// A start of the workflow named `workflow` with `state`, in the nil
    /// tenant: where it begins, its lane and its budget are the declared
    /// workflow's, which the queue looks up when it starts (so the workflow
    /// value a worker's [`Workflows`](crate::orchestration::Workflows) took
    /// is not needed again).
    ///
    /// ```
    /// # use drover::orchestration::Start;
    /// # #[derive(serde::Serialize)] struct Checkout { order: u64 }
    /// let start = Start::new("checkout", &Checkout { order: 7 })?.key("checkout:7");
    /// # Ok::<(), drover::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `kind` for a name that is not a kind's
    /// (`[a-z0-9_.:-]{1,128}`), on `state` if it does not serialize.
    /// Starting it fails with [`Error::InvalidInput`] when the queue knows
    /// no workflow of that name.
    pub fn new<S: serde::Serialize + ?Sized>(workflow: &str, state: &S) -> Result<Start> {
        crate::item::validate_kind(workflow)?;
        let state = serde_json::to_value(state)
            .map_err(|e| Error::invalid("state", format!("does not serialize: {e}")))?;
        Ok(Start {
            kind: workflow.to_owned(),
            tenant_id: Uuid::nil(),
            state,
            first_step: String::new(),
            lane: String::new(),
            max_attempts: 0,
            idempotency_key: None,
        })
    }

    /// Sets the idempotency key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the tenant.
    pub fn tenant(mut self, tenant: Uuid) -> Self {
        self.tenant_id = tenant;
        self
    }

    /// The record and its first step item, checked.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a bad kind, lane, step or key.
    pub fn build(&self) -> Result<(NewOrchestration, NewItem)> {
        crate::item::validate_kind(&self.kind)?;
        crate::item::validate_lane(&self.lane)?;
        if self.first_step.trim().is_empty() {
            return Err(Error::invalid("first_step", "must name a step"));
        }
        if self.max_attempts < 1 {
            return Err(Error::invalid("max_attempts", "must be at least 1"));
        }
        if self
            .idempotency_key
            .as_ref()
            .is_some_and(|k| k.is_empty() || k.len() > 512)
        {
            return Err(Error::invalid("idempotency_key", "must be 1 to 512 bytes"));
        }
        let id = Uuid::now_v7();
        let new = NewOrchestration {
            id,
            tenant_id: self.tenant_id,
            kind: self.kind.clone(),
            lane: self.lane.clone(),
            max_attempts: self.max_attempts,
            step: self.first_step.clone(),
            state: self.state.clone(),
            idempotency_key: self.idempotency_key.clone(),
        };
        let first =
            transition::step_item(self.tenant_id, id, &self.lane, self.max_attempts, 1, None);
        Ok((new, first))
    }
}

impl Queue {
    /// Declares a workflow on this queue and its clones, so a
    /// [`Start::new`] names it (a worker's `workflows` call and
    /// `Workflows::declare` make it).
    pub(crate) fn declare_workflow(&self, name: &str, declared: DeclaredWorkflow) {
        let mut w = self.workflows.0.write().unwrap_or_else(|p| p.into_inner());
        w.insert(name.to_owned(), declared);
    }

    /// `start` with what a start by name leaves empty filled from the
    /// declared workflow.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `kind` when a start by name names a
    /// workflow this queue does not know.
    fn resolve_start(&self, start: &Start) -> Result<Start> {
        if !start.first_step.is_empty() && !start.lane.is_empty() && start.max_attempts != 0 {
            return Ok(start.clone());
        }
        let w = self.workflows.0.read().unwrap_or_else(|p| p.into_inner());
        let Some(d) = w.get(&start.kind) else {
            return Err(Error::invalid(
                "kind",
                format!(
                    "no workflow {:?} is declared on this queue: build a worker with it over this \
                     queue (WorkerBuilder::workflows) or call Workflows::declare(&queue), or \
                     start it with Start::of(&workflow, &state)",
                    start.kind
                ),
            ));
        };
        let mut s = start.clone();
        if s.first_step.is_empty() {
            s.first_step.clone_from(&d.first_step);
        }
        if s.lane.is_empty() {
            s.lane.clone_from(&d.lane);
        }
        if s.max_attempts == 0 {
            s.max_attempts = d.max_attempts;
        }
        Ok(s)
    }

    /// Starts an orchestration: its record and first step item in one
    /// transaction. With a key, a retried start returns the first start's
    /// record and writes nothing.
    ///
    /// # Errors
    /// As [`Start::build`]; [`Error::InvalidInput`] on `kind` for a
    /// [`Start::new`] naming a workflow this queue does not know; storage
    /// errors.
    ///
    /// # Cancel safety
    /// One transaction: dropped, it either committed or not.
    pub async fn start(&self, start: &Start) -> Result<OrchestrationInserted> {
        let (new, first) = self.resolve_start(start)?.build()?;
        let out = self.store().orchestration_insert(&new, &first).await?;
        if out.result == InsertResult::Inserted {
            metrics::counter!("drover_orchestrations_started_total").increment(1);
            count_step_item(&out.record);
        }
        Ok(out)
    }

    /// Starts an orchestration on the caller's connection, inside the
    /// caller's transaction (as [`Queue::enqueue_in`]): the record and its
    /// first step item exist if and only if the caller commits. With a key,
    /// a retried start meets its own orchestration. On SQLite call
    /// [`Queue::wake`] with the workflow's lane after committing for an
    /// instant pickup.
    ///
    /// # Errors
    /// As [`Queue::start`]; [`Error::Config`] when the connection is of
    /// another backend than the queue.
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn start_in<C>(&self, conn: &mut C, start: &Start) -> Result<OrchestrationInserted>
    where
        C: crate::queue::Transactional + ?Sized,
    {
        let (new, first) = self.resolve_start(start)?.build()?;
        let out = conn.start_prepared(self, &new, &first).await?;
        if out.result == InsertResult::Inserted {
            metrics::counter!("drover_orchestrations_started_total").increment(1);
            count_step_item(&out.record);
        }
        Ok(out)
    }

    /// Reads an orchestration.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant has none with that id.
    pub async fn orchestration(&self, tenant: Uuid, id: Uuid) -> Result<Orchestration> {
        self.store()
            .orchestration_get(tenant, id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("orchestration {id}")))
    }

    /// Lists orchestrations, newest first.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn orchestrations(&self, filter: &OrchestrationFilter) -> Result<Vec<Orchestration>> {
        self.store().orchestration_list(filter).await
    }

    /// Sends the signal `name` to an orchestration, as `principal` (an
    /// operator of the tenant, as for [`Queue::cancel`]). Parked for it, the
    /// orchestration runs again at once; otherwise the signal is kept and
    /// its next park for `name` consumes it. With a key, a resent signal
    /// changes nothing ([`SignalOutcome::Duplicate`]).
    ///
    /// # Errors
    /// [`Error::Forbidden`] without the operate permission on the tenant;
    /// [`Error::NotFound`] for no such orchestration; [`Error::Conflict`]
    /// when it has finished; [`Error::InvalidInput`] on `name` when empty.
    ///
    /// # Cancel safety
    /// One transaction.
    pub async fn signal(
        &self,
        principal: &Principal,
        tenant: Uuid,
        orchestration_id: Uuid,
        name: &str,
        payload: serde_json::Value,
        key: Option<&str>,
    ) -> Result<SignalOutcome> {
        self.check_operator(principal, tenant, "signal orchestrations")?;
        if name.trim().is_empty() || name.len() > 128 {
            return Err(Error::invalid("name", "must be 1 to 128 bytes"));
        }
        let signal = Signal {
            id: Uuid::now_v7(),
            tenant_id: tenant,
            orchestration_id,
            name: name.to_owned(),
            payload,
            idempotency_key: key.map(str::to_owned),
            consumed_at: None,
            created_at: Utc::now(),
        };
        let out = self.store().orchestration_signal(&signal).await?;
        if out == SignalOutcome::Woke
            && let Ok(r) = self.orchestration(tenant, orchestration_id).await
        {
            crate::queue::counters::count("drover_enqueued_total", &r.lane, STEP_KIND, 1);
        }
        Ok(out)
    }

    /// Cancels an orchestration, as `principal` (an operator of the
    /// tenant): the completed steps' compensations run newest first, and it
    /// ends `cancelled`.
    ///
    /// Cooperative: a `running` record has a step in flight, whose effect
    /// must not be lost, so the cancel is a request (the record comes back
    /// still `running`, `cancel_requested` set). The step's transition
    /// lands as usual and compensation starts from there, the step just
    /// finished first; a step not yet started is not run. A record that is
    /// `parked` or `stuck` has nothing in flight and starts compensating at
    /// once. A step that completes the orchestration before the request
    /// is seen wins: the record stays `completed`.
    ///
    /// # Errors
    /// [`Error::Forbidden`] without the operate permission on the tenant;
    /// [`Error::NotFound`]; [`Error::Conflict`] when it has finished or is
    /// compensating already, or kept moving under every try.
    pub async fn cancel_orchestration(
        &self,
        principal: &Principal,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Orchestration> {
        self.check_operator(principal, tenant, "cancel orchestrations")?;
        let mut last = None;
        for _ in 0..CANCEL_TRIES {
            let rec = self.orchestration(tenant, id).await?;
            if rec.status.is_final() || rec.status == OrchestrationStatus::Compensating {
                return Err(Error::Conflict(format!(
                    "orchestration {id} is {}: nothing to cancel",
                    rec.status
                )));
            }
            let out = if rec.status == OrchestrationStatus::Running {
                if rec.cancel_requested {
                    return Ok(rec);
                }
                self.store()
                    .orchestration_request_cancel(tenant, id, rec.version)
                    .await
            } else {
                let t = transition::cancel_requested(&rec, Utc::now());
                self.store()
                    .orchestration_update(&t)
                    .await
                    .inspect(|after| {
                        count_step_item(after);
                    })
            };
            match out {
                Ok(after) => return Ok(after),
                Err(e) if e.is_conflict() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Conflict(format!("orchestration {id} kept moving"))))
    }

    /// Resumes a `stuck` orchestration, as `principal` (an operator of the
    /// tenant, after the code was fixed): its step runs again as it was
    /// when it got stuck.
    ///
    /// # Errors
    /// [`Error::Forbidden`] without the operate permission on the tenant;
    /// [`Error::NotFound`]; [`Error::Conflict`] when it is not stuck.
    pub async fn resume_orchestration(
        &self,
        principal: &Principal,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Orchestration> {
        self.check_operator(principal, tenant, "resume orchestrations")?;
        let rec = self.orchestration(tenant, id).await?;
        if rec.status != OrchestrationStatus::Stuck {
            return Err(Error::Conflict(format!(
                "orchestration {id} is {}, not stuck",
                rec.status
            )));
        }
        let mut w = RecordWrite::of(&rec);
        let now = Utc::now();
        w.status = rec.resume_as.unwrap_or(OrchestrationStatus::Running);
        w.resume_as = None;
        w.push_history(HistoryEntry {
            step: rec.step.clone(),
            attempt: 0,
            started: now,
            ended: now,
            outcome: "resumed by an operator".into(),
        });
        let t = Transition {
            tenant_id: rec.tenant_id,
            id: rec.id,
            expected_version: rec.version,
            write: w,
            enqueue: Some(transition::step_item(
                rec.tenant_id,
                rec.id,
                &rec.lane,
                rec.max_attempts,
                rec.version + 1,
                None,
            )),
            consume_signal: None,
        };
        let after = self.store().orchestration_update(&t).await?;
        count_step_item(&after);
        Ok(after)
    }
}
