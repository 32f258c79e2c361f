//! The outbox's storage vocabulary: the outbox row and its statuses, the
//! [`OutboxStore`] seam (a supertrait of [`Store`](crate::Store)),
//! and the relay's decision as data both relay paths execute: what a
//! claimed batch becomes ([`RelayPlan::of`], from [`relayed_item`] and
//! [`relayed_event`]) and what its writes came to ([`RelayTally`]).
//! `crate::outbox` re-exports all of it under its old paths and keeps the
//! writers and the relay service; the invariants every backend keeps are
//! stated there and checked by the contract cases in
//! `store/contract/outbox.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::events::{EVENT_PAYLOAD_MAX_DEFAULT, EventAppended, NewEvent};
use drover_core::error::{Error, Result};
use drover_core::item::{DEFAULT_LANE, DEFAULT_MAX_ATTEMPTS, InsertResult, NewItem};

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
    /// The item's flow-control group (`work.*` rows), if any.
    pub group: Option<String>,
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
            group: None,
            actor: Uuid::nil(),
            request_id: None,
            traceparent: None,
            created_at: Utc::now(),
        }
    }

    /// The same row with the item's flow-control group set.
    #[must_use]
    pub fn with_group(mut self, group: Option<String>) -> Self {
        self.group = group;
        self
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
                drover_core::item::validate_kind(k)?;
                drover_core::item::validate_lane(&self.lane)?;
                if let Some(g) = &self.group {
                    drover_core::item::validate_group(g)?;
                }
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
            Some(OutboxTarget::Event(t)) => drover_core::item::validate_kind(t).map_err(|_| {
                Error::invalid("kind", "an event topic must match [a-z0-9_.:-]{1,128}")
            })?,
            None => {
                return Err(Error::invalid(
                    "kind",
                    "an outbox row's kind must be work.<kind> or event.<topic>",
                ));
            }
        }
        drover_core::item::validate_payload(&self.payload, max_payload_bytes)?;
        if let Some(t) = &self.traceparent {
            drover_core::trace::validate_traceparent(t)?;
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
    /// The item's flow-control group, if any.
    pub group: Option<String>,
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
    /// transaction, `drover::Queue::outbox_work_in`), and publishes the
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
    /// items and events [`RelayPlan::of`] makes of them (payloads checked
    /// against `max_payload` bytes), counts the answers in a
    /// [`RelayTally`], and marks the rows whose item or event exists done,
    /// all in one commit: the relay's decision is data the store computes,
    /// the same plan and tally the stepwise path executes. A run that dies
    /// or loses its connection part-way rolls back whole, its claim
    /// included, so the rows are claimable again at once. The rows the plan
    /// or the writes refused keep their claim (for
    /// [`OutboxStore::outbox_fail`]).
    ///
    /// `None` (the default) when the store cannot hold a claim and the
    /// writes in one transaction; the relay then runs the steps one by one.
    async fn outbox_relay_atomic(
        &self,
        params: &OutboxClaimParams,
        max_payload: usize,
    ) -> Result<Option<RelayBatch>> {
        let _ = (params, max_payload);
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

/// What turns a claimed batch into its [`RelayPlan`] (pure: no I/O). Kept
/// for code that names it; the store and the relay compute the plan with
/// [`RelayPlan::of`] and take no callback.
pub type RelayPlanner = dyn Fn(&[OutboxRow]) -> RelayPlan + Send + Sync;

/// What a relay run makes of its claimed rows, before anything is
/// written: each `work.*` row's item, each `event.*` row's event, and the
/// rows it cannot relay with the reason (an invalid lane, an unknown kind).
/// Indexes are the rows' positions in the claimed batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelayPlan {
    /// The items to insert, each with its row's index.
    pub items: Vec<(usize, NewItem)>,
    /// The events to append, each with its row's index.
    pub events: Vec<(usize, NewEvent)>,
    /// The rows refused before any write, with the error.
    pub failed: Vec<(usize, String)>,
}

impl RelayPlan {
    /// The plan for `rows`: items and events under each row's id, payloads
    /// checked against `max_payload` bytes (an event's also against the
    /// event log's bound). The one decision of what a batch writes and
    /// refuses, which both relay paths execute.
    pub fn of(rows: &[OutboxRow], max_payload: usize) -> RelayPlan {
        let mut plan = RelayPlan::default();
        for (i, row) in rows.iter().enumerate() {
            match row.target() {
                Some(OutboxTarget::Work(kind)) => match relayed_item(row, kind, max_payload) {
                    Ok(item) => plan.items.push((i, item)),
                    Err(e) => plan.failed.push((i, e.to_string())),
                },
                Some(OutboxTarget::Event(topic)) => {
                    let ev = relayed_event(row, topic);
                    // The event log's own bound too (a queue may set its
                    // bound above it): a bad event is refused here, alone,
                    // the same on the one-transaction path and the stepwise
                    // one, never by the append failing the whole batch.
                    match ev.validate(max_payload.min(EVENT_PAYLOAD_MAX_DEFAULT)) {
                        Ok(()) => plan.events.push((i, ev)),
                        Err(e) => plan.failed.push((i, e.to_string())),
                    }
                }
                None => plan
                    .failed
                    .push((i, format!("unknown outbox kind {:?}", row.kind))),
            }
        }
        plan
    }
}

/// What the writes of one batch came to: the claims of the rows whose item
/// or event now exists (to be marked done), the rows that failed, and how
/// many items and events were new.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelayTally {
    /// Claims of the rows to mark done.
    pub done: Vec<OutboxClaim>,
    /// Rows that cannot be relayed (by index in the batch), with the error.
    pub failed: Vec<(usize, String)>,
    /// Items inserted now (the others met their own item).
    pub items_inserted: u64,
    /// The lane and kind of each item inserted now, for
    /// `drover_enqueued_total`.
    pub inserted: Vec<(String, String)>,
    /// Events appended now (the others were already in the log).
    pub events_appended: u64,
}

impl RelayTally {
    /// A tally starting from the plan's refused rows.
    pub fn new(failed: Vec<(usize, String)>) -> Self {
        RelayTally {
            failed,
            ..RelayTally::default()
        }
    }

    /// Counts the answers of the bulk item insert for `items` (in order).
    pub fn items(
        &mut self,
        rows: &[OutboxRow],
        items: &[(usize, NewItem)],
        results: &[InsertResult],
    ) {
        for ((i, item), r) in items.iter().zip(results) {
            let row = &rows[*i];
            match r {
                InsertResult::Inserted => {
                    self.items_inserted += 1;
                    self.inserted.push((item.lane.clone(), item.kind.clone()));
                    self.done.extend(row.claim());
                }
                // Its own item, from an earlier relay of this row.
                InsertResult::IdExists => self.done.extend(row.claim()),
                InsertResult::KeyExists => self.failed.push((
                    *i,
                    "another item of the tenant holds the row's id as its idempotency key".into(),
                )),
                InsertResult::IdTaken => self.failed.push((
                    *i,
                    "the row's id is held by an item of another tenant".into(),
                )),
            }
        }
    }

    /// Counts the answers of the event append for `events` (in order).
    pub fn events(
        &mut self,
        rows: &[OutboxRow],
        events: &[(usize, NewEvent)],
        answers: Vec<Result<EventAppended>>,
    ) {
        for ((i, _), a) in events.iter().zip(answers) {
            let row = &rows[*i];
            match a {
                Ok(EventAppended::Appended { .. }) => {
                    self.events_appended += 1;
                    self.done.extend(row.claim());
                }
                Ok(EventAppended::AlreadyThere { .. }) => self.done.extend(row.claim()),
                Err(e) => self.failed.push((*i, e.to_string())),
            }
        }
    }
}

/// The writes one relay batch is made of, as [`relay_rows`] runs them:
/// the stepwise relay implements it on the store's own calls, PostgreSQL's
/// one-transaction path on its open transaction. Only how each write is
/// made differs; what is written, in which order, and what the answers
/// come to is [`relay_rows`]'s, written once.
#[async_trait]
pub trait RelayWrites: Send {
    /// Inserts `items` (bulk, never overwriting): one answer per item, in
    /// order.
    async fn insert_items(&mut self, items: &[NewItem]) -> Result<Vec<InsertResult>>;

    /// Appends `events`: one answer per event, in order; an event the log
    /// refuses on its own is that event's `Err`, any other error fails the
    /// batch.
    async fn append_events(&mut self, events: &[NewEvent]) -> Result<Vec<Result<EventAppended>>>;

    /// Marks the rows of `done` done; returns how many landed (the others
    /// were stale).
    async fn mark_done(&mut self, done: &[OutboxClaim]) -> Result<u64>;
}

/// The relay algorithm, once: the plan of the claimed `rows`
/// ([`RelayPlan::of`], payloads checked against `max_payload` bytes), the
/// items inserted and the events appended through `writes`, their answers
/// counted in a [`RelayTally`], and the rows whose item or event exists
/// marked done. Both relay paths run it (the stepwise one and PostgreSQL's
/// one transaction), so they cannot disagree on a row.
///
/// # Errors
/// The first error of a write (the batch's run fails; see
/// [`OutboxStore::outbox_relay_atomic`] for what is left behind).
pub async fn relay_rows(
    rows: Vec<OutboxRow>,
    max_payload: usize,
    writes: &mut (dyn RelayWrites + '_),
) -> Result<RelayBatch> {
    if rows.is_empty() {
        return Ok(RelayBatch::default());
    }
    let plan = RelayPlan::of(&rows, max_payload);
    let mut tally = RelayTally::new(plan.failed);
    if !plan.items.is_empty() {
        let batch: Vec<NewItem> = plan.items.iter().map(|(_, it)| it.clone()).collect();
        let results = writes.insert_items(&batch).await?;
        tally.items(&rows, &plan.items, &results);
    }
    if !plan.events.is_empty() {
        let batch: Vec<NewEvent> = plan.events.iter().map(|(_, e)| e.clone()).collect();
        let answers = writes.append_events(&batch).await?;
        tally.events(&rows, &plan.events, answers);
    }
    let landed = if tally.done.is_empty() {
        0
    } else {
        writes.mark_done(&tally.done).await?
    };
    Ok(RelayBatch {
        rows,
        tally,
        landed,
    })
}

/// One relayed batch as the store reports it: the rows claimed, the tally
/// of the writes, and how many of `tally.done` were marked done (the rest
/// were stale: their claim had passed to another relay).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelayBatch {
    /// The rows claimed, oldest first.
    pub rows: Vec<OutboxRow>,
    /// What the writes came to.
    pub tally: RelayTally,
    /// Rows marked done.
    pub landed: u64,
}

/// The item a `work.<kind>` row becomes: id and key the row's id, created
/// by its actor, its request and trace, the lane, priority and attempt
/// budget of the row's own columns, and the payload exactly as written.
///
/// A legacy row (written before migration 0030: no lane column) keeps the
/// format it was written in: its lane is the payload's [`LANE_ENTRY`]
/// (removed from the item's payload), the default lane without one.
pub fn relayed_item(row: &OutboxRow, kind: &str, max_payload: usize) -> Result<NewItem> {
    let mut payload = row.payload.clone();
    let lane = match &row.lane {
        Some(lane) => lane.clone(),
        None => match payload.as_object_mut().map(|o| o.remove(LANE_ENTRY)) {
            Some(Some(serde_json::Value::String(lane))) => lane,
            Some(None) => DEFAULT_LANE.to_owned(),
            Some(Some(_)) => {
                return Err(Error::invalid(
                    "lane",
                    "the payload's lane entry is not a string",
                ));
            }
            None => {
                return Err(Error::invalid(
                    "payload",
                    "a work row's payload is not an object",
                ));
            }
        },
    };
    let item = NewItem {
        id: row.id,
        tenant_id: row.tenant_id,
        kind: kind.to_owned(),
        lane,
        group: row.group.clone(),
        payload,
        priority: row.priority,
        available_at: None,
        max_attempts: row.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        idempotency_key: Some(row.id.to_string()),
        created_by: row.actor,
        request_id: row.request_id.clone(),
        traceparent: row.traceparent.clone(),
        created_at: row.created_at,
        // The row's id is its key for as long as the item exists: a relay
        // that runs twice must meet its own item, finished or not.
        unique_while_active: false,
    };
    item.validate(max_payload)?;
    Ok(item)
}

/// The event an `event.<topic>` row becomes, under the row's id.
pub fn relayed_event(row: &OutboxRow, topic: &str) -> NewEvent {
    NewEvent {
        id: row.id,
        tenant: row.tenant_id,
        topic: topic.to_owned(),
        payload: row.payload.clone(),
        actor: row.actor,
        request_id: row.request_id.clone(),
        traceparent: row.traceparent.clone(),
    }
}
