//! Orchestrations as the queue's API drives them: start (in a transaction
//! of its own or the caller's), read, signal, cancel and resume. The record,
//! its transitions and the runner are [`crate::orchestration`]'s.
//!
//! Invariants: signal, cancel and resume need the operate permission on the
//! tenant ([`Queue::check_operator`]); an operator's cancel never discards
//! a step in flight (it is a request the step's own transition honours);
//! every landed transition that inserts a step item counts it once.

use chrono::Utc;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::InsertResult;
use crate::orchestration::transition::{self, STEP_KIND};
use crate::orchestration::{
    CANCEL_TRIES, HistoryEntry, Orchestration, OrchestrationFilter, OrchestrationInserted,
    OrchestrationStatus, RecordWrite, Signal, SignalOutcome, Start, Transition, count_step_item,
};
use crate::queue::{Principal, Queue};

impl Queue {
    /// Starts an orchestration: its record and first step item in one
    /// transaction. With a key, a retried start returns the first start's
    /// record and writes nothing.
    ///
    /// # Errors
    /// As [`Start::build`]; storage errors.
    ///
    /// # Cancel safety
    /// One transaction: dropped, it either committed or not.
    pub async fn start(&self, start: &Start) -> Result<OrchestrationInserted> {
        let (new, first) = start.build()?;
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
        let (new, first) = start.build()?;
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
