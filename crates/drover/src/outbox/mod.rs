//! The transactional outbox: a producer writes its own row and an outbox row
//! in one transaction, and the relay turns the outbox row into a work item
//! (`work.<kind>`) or an event (`event.<topic>`) under the row's own id.
//!
//! This module owns the outbox row and its statuses, the storage seam for
//! it ([`OutboxStore`], a supertrait of [`Store`](crate::Store)) and the
//! relay service ([`Relay`]). The typed writers ([`Queue::outbox_work_in`],
//! [`Queue::outbox_event_in`] and their own-transaction twins) are the
//! queue's API and live with it (`queue/outbox.rs`).
//!
//! Invariants every backend keeps (the contract cases in
//! `store/contract/outbox.rs` check each one):
//!
//! - **A row exists if and only if the caller's transaction commits**: on
//!   PostgreSQL and SQLite it is written on the caller's own connection, so
//!   a row written in a transaction that rolls back is never relayed.
//! - **A claim hands each pending row to one relay**: rows are taken in
//!   batches (`FOR UPDATE SKIP LOCKED` on PostgreSQL), each batch under a
//!   fresh random claim token and a lease on the store's clock (the database
//!   clock on PostgreSQL). A row whose lease passed (its relay died) is
//!   claimable again.
//! - **Every write after a claim is fenced** in its statement on the claim
//!   token and the lease (a stale relay's write changes nothing), or, on
//!   PostgreSQL's one-transaction batch, by the claim's row lock held until
//!   that write commits.
//! - **Relaying twice changes nothing**: the item's id and idempotency key
//!   are the row's id (an event's id is the row's id), so a second relay of
//!   the same row meets its own item (`IdExists`) and inserts nothing.
//! - **A row is never dropped before it is done**: a row that cannot be
//!   relayed is retried with backoff, then parked as `failed` with its
//!   error; the purge removes only done rows past the retention (on
//!   PostgreSQL by truncating a ring child, never row by row; see
//!   `docs/design.md`).
//! - **Tenant-scoped**: every per-tenant call reads and writes only that
//!   tenant's rows; claim, the fenced writes after it, purge, stats and the
//!   unscoped list are the documented system operations.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{DEFAULT_LANE, DEFAULT_MAX_ATTEMPTS};

mod relay;
mod sweep;

pub use crate::queue::OutboxConnection;
pub use relay::{
    RELAY_BACKOFF_BASE_DEFAULT, RELAY_BACKOFF_CAP_DEFAULT, RELAY_BATCH_DEFAULT, RELAY_BATCH_MAX,
    RELAY_CONCURRENCY_DEFAULT, RELAY_INTERVAL_DEFAULT, RELAY_JITTER, RELAY_LEASE_DEFAULT,
    RELAY_MAX_ATTEMPTS_DEFAULT, RELAY_RETENTION_DEFAULT, RELAY_RETRY_MIN, RELAY_STRATEGY,
    RELAY_SWEEP_BATCHES_DEFAULT, RELAY_SWEEP_BATCHES_MAX, RELAY_SWEEP_BUDGET_DEFAULT, Relay,
    RelayBatch, RelayConfig, RelayPlan, RelayPlanner, RelayReport, RelayTally, relay_role,
    relayed_event, relayed_item,
};
pub use sweep::{RelaySweep, RelaySweepReport};

/// The kind prefix of a row the relay turns into a work item.
pub const WORK_PREFIX: &str = "work.";
/// The kind prefix of a row the relay appends to the event log.
pub const EVENT_PREFIX: &str = "event.";
/// The payload entry that named the item's lane in a `work.<kind>` row
/// written before migration 0030 (a row whose `lane` column is empty). Only
/// such a legacy row's `lane` entry is read (and removed) by the relay; a
/// row written since carries its lane, priority and attempt budget in
/// columns of its own, so a payload field named `lane` is the job's own and
/// reaches the handler untouched.
pub const LANE_ENTRY: &str = "lane";
/// The wake-up name an outbox insert publishes on the store's wake-up
/// channel (`NOTIFY drover_wake, '<schema>:drover.outbox'` on PostgreSQL).
/// It contains a `.`, which no lane name may, so no worker mistakes it for
/// a lane.
pub const OUTBOX_WAKE: &str = "drover.outbox";

/// Where an outbox row is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    /// Waiting for (or being handled by) a relay.
    Pending,
    /// Relayed: its item or event exists. Purged past the retention.
    Done,
    /// Parked after its attempts ran out, with its error. Never purged.
    Failed,
}

impl OutboxStatus {
    /// Every status.
    pub const ALL: [OutboxStatus; 3] = [
        OutboxStatus::Pending,
        OutboxStatus::Done,
        OutboxStatus::Failed,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Pending => "pending",
            OutboxStatus::Done => "done",
            OutboxStatus::Failed => "failed",
        }
    }

    /// Parses a stored name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `status`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| Error::invalid("status", format!("unknown outbox status {s:?}")))
    }
}

impl std::fmt::Display for OutboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An outbox row as a producer writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewOutboxRow {
    /// UUID v7: becomes the item's id and idempotency key, or the event's id.
    pub id: Uuid,
    /// The tenant that owns it (and its item or event).
    pub tenant_id: Uuid,
    /// `work.<kind>` or `event.<topic>`.
    pub kind: String,
    /// The item's payload (exactly as the handler decodes it) or the event's.
    pub payload: serde_json::Value,
    /// The item's lane (`work.*` rows; an event row ignores it). Default
    /// [`DEFAULT_LANE`]; a typed write takes the kind's.
    pub lane: String,
    /// The item's priority (lower runs first; `work.*` rows). Default 0.
    pub priority: i16,
    /// The item's attempt budget (`work.*` rows). Default
    /// [`DEFAULT_MAX_ATTEMPTS`]; a typed write takes the kind's.
    pub max_attempts: i32,
    /// Who caused it: the item's `created_by`, the event's actor.
    pub actor: Uuid,
    /// The request that caused it.
    pub request_id: Option<String>,
    /// The W3C trace context of that request.
    pub traceparent: Option<String>,
    /// When it was written (the producer's clock).
    pub created_at: DateTime<Utc>,
}

impl NewOutboxRow {
    /// A row of `kind` with a fresh v7 id, in the nil tenant, by the nil actor.
    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> Self {
        NewOutboxRow {
            id: Uuid::now_v7(),
            tenant_id: Uuid::nil(),
            kind: kind.into(),
            payload,
            lane: DEFAULT_LANE.to_owned(),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            actor: Uuid::nil(),
            request_id: None,
            traceparent: None,
            created_at: Utc::now(),
        }
    }

    /// The same row with the item's lane set.
    #[must_use]
    pub fn with_lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = lane.into();
        self
    }

    /// The same row with the item's priority set (lower runs first).
    #[must_use]
    pub fn with_priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// The same row with the item's attempt budget set.
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Checks the row before anything is written.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `kind` unless it is `work.<kind>` or
    /// `event.<topic>` with a valid name; on `payload` when it is larger than
    /// `max_payload_bytes`, or when a `work.*` payload is not a JSON object;
    /// on `lane` or `max_attempts` of a `work.*` row as an item's are
    /// checked; on `traceparent` when malformed.
    pub fn validate(&self, max_payload_bytes: usize) -> Result<()> {
        match OutboxTarget::of(&self.kind) {
            Some(OutboxTarget::Work(k)) => {
                crate::item::validate_kind(k)?;
                crate::item::validate_lane(&self.lane)?;
                if self.max_attempts < 1 {
                    return Err(Error::invalid(
                        "max_attempts",
                        format!("must be at least 1, got {}", self.max_attempts),
                    ));
                }
                if !self.payload.is_object() {
                    return Err(Error::invalid(
                        "payload",
                        "a work.<kind> row's payload must be a JSON object",
                    ));
                }
            }
            Some(OutboxTarget::Event(t)) => crate::item::validate_kind(t).map_err(|_| {
                Error::invalid("kind", "an event topic must match [a-z0-9_.:-]{1,128}")
            })?,
            None => {
                return Err(Error::invalid(
                    "kind",
                    "an outbox row's kind must be work.<kind> or event.<topic>",
                ));
            }
        }
        crate::item::validate_payload(&self.payload, max_payload_bytes)?;
        if let Some(t) = &self.traceparent {
            crate::trace::validate_traceparent(t)?;
        }
        Ok(())
    }
}

/// What a row's kind asks the relay for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxTarget<'a> {
    /// A work item of this kind.
    Work(&'a str),
    /// An event of this topic.
    Event(&'a str),
}

impl<'a> OutboxTarget<'a> {
    /// Splits a row's kind; `None` for neither prefix.
    pub fn of(kind: &'a str) -> Option<Self> {
        if let Some(k) = kind.strip_prefix(WORK_PREFIX) {
            Some(OutboxTarget::Work(k))
        } else {
            kind.strip_prefix(EVENT_PREFIX).map(OutboxTarget::Event)
        }
    }
}

/// An outbox row as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxRow {
    /// Its id (see [`NewOutboxRow::id`]).
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// `work.<kind>` or `event.<topic>`.
    pub kind: String,
    /// Its payload as written.
    pub payload: serde_json::Value,
    /// The item's lane; `None` for a row written before migration 0030,
    /// whose lane is its payload's [`LANE_ENTRY`] (the legacy format).
    pub lane: Option<String>,
    /// The item's priority (0 for a legacy row).
    pub priority: i16,
    /// The item's attempt budget; `None` for a legacy row (the default
    /// budget then).
    pub max_attempts: Option<i32>,
    /// Who caused it.
    pub actor: Uuid,
    /// The causing request.
    pub request_id: Option<String>,
    /// The causing trace context.
    pub traceparent: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// Where it is.
    pub status: OutboxStatus,
    /// Failed relay attempts so far.
    pub attempts: i32,
    /// Not claimable before this (the retry backoff).
    pub available_at: DateTime<Utc>,
    /// The last relay failure's message.
    pub last_error: Option<String>,
    /// The token of the relay claim holding it, if any.
    pub claim_token: Option<Uuid>,
    /// When that claim's lease passes.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When it was relayed (status `done`).
    pub relayed_at: Option<DateTime<Utc>>,
}

impl OutboxRow {
    /// What the row asks the relay for.
    pub fn target(&self) -> Option<OutboxTarget<'_>> {
        OutboxTarget::of(&self.kind)
    }

    /// The handle on its current claim, if it has one.
    pub fn claim(&self) -> Option<OutboxClaim> {
        self.claim_token.map(|token| OutboxClaim {
            tenant_id: self.tenant_id,
            id: self.id,
            token,
        })
    }
}

/// A handle on a relay's claim of one row: what a fenced write needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutboxClaim {
    /// The row's tenant.
    pub tenant_id: Uuid,
    /// The row.
    pub id: Uuid,
    /// The claim's token.
    pub token: Uuid,
}

/// What [`OutboxStore::outbox_claim`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxClaimParams {
    /// How long the claim holds before another relay may take the rows.
    pub lease: Duration,
    /// At most this many rows.
    pub limit: u32,
}

/// How [`OutboxStore::outbox_fail`] records a failed relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailParams {
    /// The error kept as `last_error` (bounded by the store).
    pub error: String,
    /// The wait before the next attempt, when one is left.
    pub retry_delay: Duration,
    /// The attempt budget: at it the row is parked as `failed`.
    pub max_attempts: i32,
}

/// What a failed relay did to the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum OutboxFailOutcome {
    /// Pending again, not before `available_at`.
    Retrying {
        /// When it may be relayed again.
        available_at: DateTime<Utc>,
    },
    /// The budget is spent: parked as `failed` with its error.
    Parked,
}

/// A filter for [`OutboxStore::outbox_list`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxFilter {
    /// Only this tenant's rows; `None` lists across tenants (system operation).
    pub tenant_id: Option<Uuid>,
    /// Only rows in this status.
    pub status: Option<OutboxStatus>,
    /// At most this many, newest first.
    pub limit: u32,
}

/// The outbox's counts and lag, as `drover outbox stats` prints them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutboxStats {
    /// Rows waiting for a relay (claimed ones included).
    pub pending: i64,
    /// Rows relayed and not yet purged.
    pub done: i64,
    /// Rows parked after their attempts ran out.
    pub failed: i64,
    /// Age in seconds of the oldest pending row (0 when none waits): the
    /// `drover_outbox_lag_seconds` gauge.
    pub lag_seconds: f64,
}

/// The outbox of the storage seam. Entity-then-verb; see the module docs
/// for the invariants.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Writes one validated row in a transaction of its own (the memory
    /// store's only way; on PostgreSQL and SQLite prefer the caller's
    /// transaction, [`crate::Queue::outbox_work_in`]), and publishes the
    /// outbox wake-up. An id already there changes nothing.
    async fn outbox_insert(&self, row: &NewOutboxRow) -> Result<()>;

    /// Reads one row of `tenant`.
    async fn outbox_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<OutboxRow>>;

    /// Claims up to `limit` pending rows that are available and hold no live
    /// claim, oldest first, under one fresh token and a lease from the
    /// store's clock (system operation, across tenants).
    async fn outbox_claim(&self, params: &OutboxClaimParams) -> Result<Vec<OutboxRow>>;

    /// Relays one batch in a single transaction: claims up to
    /// `params.limit` rows (as [`OutboxStore::outbox_claim`]), writes the
    /// items and events `plan` makes of them, and marks the rows whose item
    /// or event exists done, all in one commit. A run that dies or loses its
    /// connection part-way rolls back whole, its claim included, so the rows
    /// are claimable again at once. The rows `plan` or the writes refused
    /// keep their claim (for [`OutboxStore::outbox_fail`]).
    ///
    /// `None` (the default) when the store cannot hold a claim and the
    /// writes in one transaction; the relay then runs the steps one by one.
    async fn outbox_relay_atomic(
        &self,
        params: &OutboxClaimParams,
        plan: &RelayPlanner,
    ) -> Result<Option<RelayBatch>> {
        let _ = (params, plan);
        Ok(None)
    }

    /// Marks claimed rows done, each fenced on its token and lease in the
    /// statement. Returns the ids that landed; the others were stale.
    async fn outbox_complete(&self, claims: &[OutboxClaim]) -> Result<Vec<Uuid>>;

    /// Records a failed relay: one attempt spent; pending again after
    /// `retry_delay`, or parked as `failed` at the budget. Fenced:
    /// [`Error::Conflict`] when the claim is stale.
    async fn outbox_fail(
        &self,
        claim: &OutboxClaim,
        params: &OutboxFailParams,
    ) -> Result<OutboxFailOutcome>;

    /// Lists rows, newest first.
    async fn outbox_list(&self, filter: &OutboxFilter) -> Result<Vec<OutboxRow>>;

    /// Counts per status and the lag (system operation).
    async fn outbox_stats(&self) -> Result<OutboxStats>;

    /// The age in seconds of the oldest pending row, 0 when none waits
    /// (system operation): the `drover_outbox_lag_seconds` gauge, cheaper
    /// than [`OutboxStore::outbox_stats`] (no count of done rows).
    async fn outbox_lag(&self) -> Result<f64>;

    /// Removes done rows relayed before `before` (system operation); never a
    /// pending or failed row. Returns how many rows went. On PostgreSQL it
    /// truncates the ring's oldest child once every done row in it is past
    /// `before`, carrying its failed rows to the current child, and rotates
    /// the ring when the current child has been current for `rotate_after`
    /// (see `docs/design.md`); elsewhere it deletes in batches.
    async fn outbox_purge(&self, before: DateTime<Utc>, rotate_after: Duration) -> Result<u64>;
}
