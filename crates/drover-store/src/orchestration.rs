//! The orchestration record, its signals, and the storage seam for them
//! ([`OrchestrationStore`]), with the pure transitions the backends and the
//! runner share ([`transition`]). `crate::orchestration` re-exports them
//! under their old paths and keeps the runner and the workflows.
//!
//! Invariants every backend keeps (the contract cases in
//! `store/contract/orchestration.rs` check each one):
//!
//! - Every write to a record is a compare-and-set on its `version`: it lands
//!   only if the stored version is the one the writer read, and it bumps the
//!   version by one. A stale writer changes nothing and gets
//!   [`Error::Conflict`](drover_core::Error::Conflict).
//! - [`OrchestrationStore::orchestration_advance`] completes the step's work
//!   item (fenced on its claim token, status and lease) and writes the record
//!   in one transaction: both land or neither does.
//! - A park for a signal that is already waiting consumes it in the same
//!   transaction, and a signal to a record parked for it wakes the record in
//!   the signal's transaction: no signal is lost between the two.
//! - Starting with an idempotency key already used by the tenant inserts
//!   nothing and returns the existing record.
//! - A transition's step item is inserted or the transition fails: a
//!   record is never left `running` or `compensating` without its item
//!   (a key held by another item is [`Error::Conflict`](drover_core::Error::Conflict)).
//! - An operator's cancel of a running record is a request
//!   ([`OrchestrationStore::orchestration_request_cancel`]): the flag is
//!   set by a compare-and-set on the version that does not bump it, so the
//!   step in flight still lands its transition; every later write keeps
//!   the flag, and the store turns a transition that leaves the record
//!   `running` or `parked` with the flag set into the start of
//!   compensation, in the same transaction.
//! - The history keeps the last [`HISTORY_CAP`] entries and counts the
//!   ones dropped ([`Orchestration::history_dropped`]); the completed list
//!   (what compensation walks) is never trimmed, and is bounded instead by
//!   [`COMPLETED_CAP`] (see there).
//! - A listing skips (and logs) a row it cannot decode rather than fail
//!   (`decodable`); reading that one record still reports the error.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ClaimRef;
use drover_core::error::Result;
use drover_core::item::{InsertResult, NewItem};

pub mod transition;

pub use transition::{STEP_KIND, StepJob};

/// How many history entries a record keeps: the newest ones; older ones are
/// dropped and counted in [`Orchestration::history_dropped`].
pub const HISTORY_CAP: usize = 100;

/// How many steps a record's completed list holds at most. Only steps that
/// declare a compensation are listed (a step without one has nothing to
/// undo), so a polling loop of plain steps does not grow it. The list is
/// what compensation walks, so it is never trimmed: a step that would list
/// one more fails the orchestration into compensation instead, which then
/// undoes every listed step.
pub const COMPLETED_CAP: usize = 1000;

/// Where an orchestration is in its life. Drawn in `docs/orchestrations.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrchestrationStatus {
    /// A step's work item is pending or running.
    Running,
    /// Waiting for a time or a signal; the sweep or the signal resumes it.
    Parked,
    /// Its current step is not in the deployed code: waits for an operator.
    Stuck,
    /// Final: a step completed it with a result.
    Completed,
    /// A step failed for good (or an operator cancelled): the completed
    /// steps' compensations are running, newest first.
    Compensating,
    /// Final: a step failed for good and every compensation ran.
    Compensated,
    /// Final: a compensation failed for good. Counted and listed.
    CompensationFailed,
    /// Final: an operator cancelled it and every compensation ran.
    Cancelled,
}

impl OrchestrationStatus {
    /// Every status, in the order the docs list them.
    pub const ALL: [OrchestrationStatus; 8] = [
        OrchestrationStatus::Running,
        OrchestrationStatus::Parked,
        OrchestrationStatus::Stuck,
        OrchestrationStatus::Completed,
        OrchestrationStatus::Compensating,
        OrchestrationStatus::Compensated,
        OrchestrationStatus::CompensationFailed,
        OrchestrationStatus::Cancelled,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OrchestrationStatus::Running => "running",
            OrchestrationStatus::Parked => "parked",
            OrchestrationStatus::Stuck => "stuck",
            OrchestrationStatus::Completed => "completed",
            OrchestrationStatus::Compensating => "compensating",
            OrchestrationStatus::Compensated => "compensated",
            OrchestrationStatus::CompensationFailed => "compensation_failed",
            OrchestrationStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](drover_core::Error::InvalidInput) on `status`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                drover_core::Error::invalid("status", format!("unknown orchestration status {s:?}"))
            })
    }

    /// True when nothing more happens to the record.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OrchestrationStatus::Completed
                | OrchestrationStatus::Compensated
                | OrchestrationStatus::CompensationFailed
                | OrchestrationStatus::Cancelled
        )
    }
}

impl std::fmt::Display for OrchestrationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a record's history: a step (or compensation) that ran, or a
/// wake-up that moved the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The step's name (for a compensation, the step it undoes).
    pub step: String,
    /// The work item's attempt (0 for wake-ups by the sweep or a signal).
    pub attempt: i32,
    /// When the run started.
    pub started: DateTime<Utc>,
    /// When it ended.
    pub ended: DateTime<Utc>,
    /// What came of it (`next:charge`, `parked_until`, `failed: …`, …).
    pub outcome: String,
}

/// An orchestration record as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Orchestration {
    /// The record's id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// The orchestration type's name.
    pub kind: String,
    /// The lane its step items run in.
    pub lane: String,
    /// The attempt budget of each step item.
    pub max_attempts: i32,
    /// Where it is.
    pub status: OrchestrationStatus,
    /// The step to run next (running, parked), the step being compensated
    /// (compensating), or the unknown step (stuck).
    pub step: String,
    /// The typed state, as JSON.
    pub state: serde_json::Value,
    /// Grows by one with every write; every write is conditioned on it.
    pub version: i64,
    /// Parked until this time (a time park, or a signal wait's timeout).
    pub parked_until: Option<DateTime<Utc>>,
    /// Parked for this signal.
    pub waiting_for: Option<String>,
    /// The step a signal wait takes when it times out.
    pub timeout_step: Option<String>,
    /// The steps that completed, oldest first (the compensation order is
    /// its reverse).
    pub completed: Vec<String>,
    /// The steps taken, the newest [`HISTORY_CAP`] of them.
    pub history: Vec<HistoryEntry>,
    /// How many older history entries were dropped by the cap.
    pub history_dropped: i64,
    /// The result a completing step gave.
    pub result: Option<serde_json::Value>,
    /// Why it failed, was cancelled, or is stuck.
    pub error: Option<String>,
    /// An operator asked for the cancel: a running record starts
    /// compensating when its step in flight lands, and compensation ends
    /// `cancelled`.
    pub cancel_requested: bool,
    /// The status a stuck record resumes as (`running` or `compensating`).
    pub resume_as: Option<OrchestrationStatus>,
    /// The start's idempotency key.
    pub idempotency_key: Option<String>,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// Its last write.
    pub updated_at: DateTime<Utc>,
}

/// What a start writes: the record (at version 1, running its first step).
#[derive(Debug, Clone, PartialEq)]
pub struct NewOrchestration {
    /// The id (a v7 UUID, minted when the orchestration is started).
    pub id: Uuid,
    /// The tenant.
    pub tenant_id: Uuid,
    /// The orchestration type.
    pub kind: String,
    /// The lane of its step items.
    pub lane: String,
    /// Each step item's attempt budget.
    pub max_attempts: i32,
    /// The first step.
    pub step: String,
    /// The initial state.
    pub state: serde_json::Value,
    /// Optional: a retried start with the same key meets its own record.
    pub idempotency_key: Option<String>,
}

/// What a start did.
#[derive(Debug, Clone, PartialEq)]
pub struct OrchestrationInserted {
    /// `Inserted`, or which key collided (nothing was written).
    pub result: InsertResult,
    /// The stored record (the existing one on a collision).
    pub record: Orchestration,
}

/// The new values of a record, written by one compare-and-set.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordWrite {
    /// New status.
    pub status: OrchestrationStatus,
    /// New current step.
    pub step: String,
    /// New state.
    pub state: serde_json::Value,
    /// New park time.
    pub parked_until: Option<DateTime<Utc>>,
    /// New awaited signal.
    pub waiting_for: Option<String>,
    /// New timeout step.
    pub timeout_step: Option<String>,
    /// New completed-steps list.
    pub completed: Vec<String>,
    /// New history (at most [`HISTORY_CAP`]: use [`RecordWrite::push_history`]).
    pub history: Vec<HistoryEntry>,
    /// New count of dropped history entries.
    pub history_dropped: i64,
    /// New result.
    pub result: Option<serde_json::Value>,
    /// New error.
    pub error: Option<String>,
    /// New cancel flag.
    pub cancel_requested: bool,
    /// New resume status.
    pub resume_as: Option<OrchestrationStatus>,
}

impl RecordWrite {
    /// The record's current values, to change a few of.
    pub fn of(r: &Orchestration) -> RecordWrite {
        RecordWrite {
            status: r.status,
            step: r.step.clone(),
            state: r.state.clone(),
            parked_until: r.parked_until,
            waiting_for: r.waiting_for.clone(),
            timeout_step: r.timeout_step.clone(),
            completed: r.completed.clone(),
            history: r.history.clone(),
            history_dropped: r.history_dropped,
            result: r.result.clone(),
            error: r.error.clone(),
            cancel_requested: r.cancel_requested,
            resume_as: r.resume_as,
        }
    }

    /// Appends a history entry, dropping (and counting) the oldest beyond
    /// [`HISTORY_CAP`].
    pub fn push_history(&mut self, entry: HistoryEntry) {
        self.history.push(entry);
        if self.history.len() > HISTORY_CAP {
            let extra = self.history.len() - HISTORY_CAP;
            self.history.drain(..extra);
            self.history_dropped += i64::try_from(extra).unwrap_or(i64::MAX);
        }
    }
}

/// One compare-and-set on a record, with what goes in its transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The record's tenant.
    pub tenant_id: Uuid,
    /// The record.
    pub id: Uuid,
    /// The version the writer read: the write lands only on it.
    pub expected_version: i64,
    /// The new values (the version becomes `expected_version + 1`).
    pub write: RecordWrite,
    /// The next step's work item, inserted in the same transaction.
    pub enqueue: Option<NewItem>,
    /// A signal this transition consumes, in the same transaction.
    pub consume_signal: Option<Uuid>,
}

/// A signal sent to an orchestration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// The signal's id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// The orchestration it is for.
    pub orchestration_id: Uuid,
    /// Its name (`payment_confirmed`).
    pub name: String,
    /// Its payload, handed to the step it wakes.
    pub payload: serde_json::Value,
    /// Optional: a resent signal with the same key is the same signal.
    pub idempotency_key: Option<String>,
    /// When a park or a wake-up consumed it.
    pub consumed_at: Option<DateTime<Utc>>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
}

/// What sending a signal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalOutcome {
    /// The orchestration was parked for it and is running again.
    Woke,
    /// Kept: the orchestration's next park for this name consumes it.
    Kept,
    /// A signal with this key was sent before: nothing changed.
    Duplicate,
}

/// A live record whose current step's work item is in the dead letter (its
/// last attempt ended by a timeout, a lease that expired with no attempt
/// left, or a handler failure that never reached the runner) or was
/// cancelled by an operator through the item API. The sweep
/// takes the failure path for it ([`OrchestrationStore::orchestration_dead_steps`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadStep {
    /// The record, `running` or `compensating`, at the version the dead
    /// item was made for.
    pub record: Orchestration,
    /// The dead item's attempts.
    pub attempts: i32,
    /// The dead item's last error (`lease expired`, a timeout, …).
    pub error: Option<String>,
    /// The item was cancelled (by an operator), not failed.
    pub cancelled: bool,
    /// When the item was dead-lettered.
    pub failed_at: DateTime<Utc>,
}

/// A filter for [`OrchestrationStore::orchestration_list`].
#[derive(Debug, Clone, Default)]
pub struct OrchestrationFilter {
    /// Only this tenant's; `None` lists across tenants (a system operation).
    pub tenant_id: Option<Uuid>,
    /// Only in this status.
    pub status: Option<OrchestrationStatus>,
    /// Only of this kind.
    pub kind: Option<String>,
    /// At most this many, newest first.
    pub limit: u32,
}

/// The storage of orchestration records and their signals. See the module
/// docs for the invariants.
#[async_trait]
pub trait OrchestrationStore: Send + Sync {
    /// Inserts a record (version 1, running `new.step`) and its first step
    /// item in one transaction; on a key collision inserts neither and
    /// returns the existing record.
    async fn orchestration_insert(
        &self,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted>;

    /// Reads a record of `tenant`.
    async fn orchestration_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Orchestration>>;

    /// Lists records, newest first. A row that does not decode (written by
    /// a newer drover, or damaged by hand) is left out with a warning naming
    /// its id, so one such row does not hide every other from a listing.
    async fn orchestration_list(&self, filter: &OrchestrationFilter) -> Result<Vec<Orchestration>>;

    /// Completes the claimed step item (fenced) and applies `t` (a
    /// compare-and-set on the version) in one transaction. A park for a
    /// signal already waiting is turned into its wake-up in the same
    /// transaction. `Conflict` if either fence refuses; nothing changes then.
    async fn orchestration_advance(
        &self,
        claim: &ClaimRef,
        t: &Transition,
    ) -> Result<Orchestration>;

    /// Applies `t` without a claim (the sweep's resume, an operator's cancel
    /// or resume). `Conflict` if the version moved.
    async fn orchestration_update(&self, t: &Transition) -> Result<Orchestration>;

    /// Parked records whose park time has come (system operation), at most
    /// `limit`, oldest park first.
    async fn orchestration_due(&self, limit: u32) -> Result<Vec<Orchestration>>;

    /// Live records (`running`, `compensating`) whose current step's item
    /// (`drover.step:<id>:<version>`, same tenant) is `failed` or
    /// `cancelled` (system operation), at most `limit`, oldest write first.
    async fn orchestration_dead_steps(&self, limit: u32) -> Result<Vec<DeadStep>>;

    /// How many records wait for a time, a signal or an operator (system
    /// operation), for `drover_records_parked`: parked and stuck records,
    /// and live ones whose step item is `failed` or `cancelled` (stranded
    /// until the sweep repairs them).
    async fn orchestration_parked_count(&self) -> Result<i64>;

    /// Records an operator's cancel request on a `running` record at
    /// `expected_version`: sets `cancel_requested` without bumping the
    /// version, so the step in flight still lands (and the store then
    /// starts compensation). `Conflict` if the version moved or the record
    /// is not running; `NotFound` for no such record.
    async fn orchestration_request_cancel(
        &self,
        tenant: Uuid,
        id: Uuid,
        expected_version: i64,
    ) -> Result<Orchestration>;

    /// Deletes final records last written before `before`, with their
    /// signals, and consumed signals of any record consumed before
    /// `before` (system operation), at most `limit` of each. How many rows
    /// it deleted.
    async fn orchestration_purge(&self, before: DateTime<Utc>, limit: u32) -> Result<u64>;

    /// Sends a signal: kept for the next park, or waking the record if it is
    /// parked for this name, in one transaction. `NotFound` for no such
    /// record; `Conflict` when the record is final.
    async fn orchestration_signal(&self, signal: &Signal) -> Result<SignalOutcome>;

    /// The signals sent to a record, oldest first.
    async fn orchestration_signal_list(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Signal>>;
}

/// The records of a listing's rows that decode, in the rows' order. A row
/// that does not is left out with a warning naming its id (`id` reads it
/// without decoding the rest): a listing degrades by one row, never to an
/// error for every row.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn decodable<R>(
    rows: &[R],
    record: impl Fn(&R) -> Result<Orchestration>,
    id: impl Fn(&R) -> Option<Uuid>,
) -> Vec<Orchestration> {
    rows.iter()
        .filter_map(|row| match record(row) {
            Ok(o) => Some(o),
            Err(e) => {
                let id = id(row).map_or_else(|| "unreadable".to_owned(), |i| i.to_string());
                tracing::warn!(%id, error = %e, "an orchestration row does not decode: left out of the listing");
                None
            }
        })
        .collect()
}
