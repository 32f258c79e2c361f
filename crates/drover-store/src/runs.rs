//! An item's runs: the attempt history (migration 0040).
//!
//! A run is one claim, from its start to the write that ended it: the
//! worker, the two times, how it ended and the error it left. Each backend
//! records a run in the write that ends the claim (a trigger on the
//! transition out of `claimed` on PostgreSQL and SQLite, the same rule in
//! the memory store), so the hot path gains no statement and no round trip.
//!
//! Invariants every backend keeps (the contract cases in `contract::runs`
//! hold them to it):
//! - An item keeps at most [`RUNS_KEPT`] runs, its latest: a run takes the
//!   slot `claim_seq mod RUNS_KEPT`, overwriting the run that many claims
//!   before it.
//! - A run's start is the claim's (a lease renewal does not move a claimed
//!   item's `updated_at`), its end the ending write's time.
//! - The outcome is [`RunOutcome::classify`]'s, on every backend.
//! - The item purge deletes runs that finished before its cutoff, so no run
//!   outlives its purged item (whose last change is before the cutoff).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Result};
use drover_core::item::{Item, Status};

/// How many runs an item keeps: its latest.
pub const RUNS_KEPT: i64 = 20;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The handler finished: the item is done.
    Done,
    /// The handler failed and the budget allowed another attempt.
    Retry,
    /// The handler failed for the last time (or fatally): dead-lettered.
    Failed,
    /// Cancelled, by its handler or by an operator, while claimed.
    Cancelled,
    /// Deferred: pending again, later, no attempt spent.
    Snoozed,
    /// Handed back: pending again at once, no attempt spent.
    Released,
    /// The lease passed before the worker wrote: the sweep (or an operator)
    /// ended the claim.
    LeaseLost,
}

impl RunOutcome {
    /// The outcome's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Done => "done",
            RunOutcome::Retry => "retry",
            RunOutcome::Failed => "failed",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Snoozed => "snoozed",
            RunOutcome::Released => "released",
            RunOutcome::LeaseLost => "lease_lost",
        }
    }

    /// Reads a stored name.
    ///
    /// # Errors
    /// [`Error::Storage`](drover_core::Error) for a name no migration writes.
    pub fn parse(s: &str) -> Result<RunOutcome> {
        Ok(match s {
            "done" => RunOutcome::Done,
            "retry" => RunOutcome::Retry,
            "failed" => RunOutcome::Failed,
            "cancelled" => RunOutcome::Cancelled,
            "snoozed" => RunOutcome::Snoozed,
            "released" => RunOutcome::Released,
            "lease_lost" => RunOutcome::LeaseLost,
            other => {
                return Err(Error::Storage(drover_core::error::Opaque::msg(format!(
                    "unknown run outcome {other:?}"
                ))));
            }
        })
    }

    /// How the claim of `before` ended when the row became `after`, and
    /// the error the run keeps: the SQL twin is the trigger of migration
    /// 0040. A passed lease (only the sweep, the orphan failure and an
    /// operator's cancel write past one) is `LeaseLost`; otherwise the new
    /// status decides, then whether an attempt was spent, then whether the
    /// item is available later. The error is the new `last_error` for a
    /// retry, a failure or a lost lease; for a release or cancellation only
    /// when the write changed it (a note).
    pub fn classify(before: &Item, after: &Item) -> (RunOutcome, Option<String>) {
        let at = after.updated_at;
        let lost = before.lease_expires_at.is_some_and(|l| l <= at);
        let outcome = if lost {
            RunOutcome::LeaseLost
        } else {
            match after.status {
                Status::Done => RunOutcome::Done,
                Status::Cancelled => RunOutcome::Cancelled,
                Status::Failed => RunOutcome::Failed,
                _ if after.attempts > before.attempts => RunOutcome::Retry,
                _ if after.available_at > at => RunOutcome::Snoozed,
                _ => RunOutcome::Released,
            }
        };
        let error = match outcome {
            RunOutcome::LeaseLost | RunOutcome::Failed | RunOutcome::Retry => {
                after.last_error.clone()
            }
            RunOutcome::Done => None,
            _ if after.last_error != before.last_error => after.last_error.clone(),
            _ => None,
        };
        (outcome, error)
    }
}

/// One run of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemRun {
    /// The claim's fencing number (`claim_seq`): the run's place.
    pub claim_seq: i64,
    /// The worker that held the claim.
    pub worker: Option<String>,
    /// When the claim started.
    pub started_at: DateTime<Utc>,
    /// When the write that ended it landed.
    pub finished_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error it left, if any.
    pub error: Option<String>,
}

impl ItemRun {
    /// The run recorded when the claim of `before` ended as `after`.
    pub fn ended(before: &Item, after: &Item) -> ItemRun {
        let (outcome, error) = RunOutcome::classify(before, after);
        ItemRun {
            claim_seq: before.claim_seq,
            worker: before.claimed_by.clone(),
            started_at: before.updated_at,
            finished_at: after.updated_at,
            outcome,
            error,
        }
    }

    /// How long it ran (never negative).
    pub fn duration(&self) -> chrono::Duration {
        (self.finished_at - self.started_at).max(chrono::Duration::zero())
    }

    /// The slot it takes among its item's runs.
    pub fn slot(&self) -> i64 {
        self.claim_seq.rem_euclid(RUNS_KEPT)
    }
}

/// The run history's reads and its purge.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// `tenant`'s item `id`'s runs, newest first (at most [`RUNS_KEPT`]);
    /// empty for an item that never ran or that the tenant does not hold.
    async fn item_runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>>;

    /// Deletes up to `batch` runs that finished before `before` (system
    /// operation; the item purge's companion). Returns how many.
    async fn item_runs_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
}
