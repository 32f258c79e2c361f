//! The event log's storage vocabulary: the event types ([`NewEvent`],
//! [`Event`], [`EventAppended`], [`EventHead`], [`EventPurge`]) and the
//! [`EventStore`] trait every backend implements. `crate::events`
//! re-exports them under their old paths; the relay appends, the projector
//! runner reads.
//!
//! # Invariants every backend keeps
//!
//! (the contract cases in `store/contract/events.rs` check each)
//!
//! - **Positions are per tenant, dense, and handed out in commit order.**
//!   The first event of a tenant is position 1; an append takes the next
//!   position only once every earlier appender of that tenant has committed
//!   or rolled back (PostgreSQL: the tenant's head row is locked from the
//!   append to the commit; SQLite: the one writer; memory: the one lock).
//!   So a reader that sees position `n` committed knows every position below
//!   `n` is committed too, and `position > checkpoint` never skips an event
//!   that commits later (the in-flight-sequence trap; `docs/design.md`,
//!   "Why are event positions handed out in commit order?").
//! - **Append is idempotent by id within a tenant**: appending an id the
//!   tenant's log already holds appends nothing and answers
//!   [`EventAppended::AlreadyThere`] with the existing position. The relay
//!   appends each `event.<topic>` outbox row under the row's own id, so a
//!   relay that runs twice appends once.
//! - **Append-only**: an event is never updated; only the retention purge
//!   removes events, oldest first (on PostgreSQL a whole child of the ring
//!   is truncated, never a row-by-row delete), and never one a known
//!   projector has not applied (a tenant it has not reached yet included).
//! - **A purge never stalls appenders** (PostgreSQL): it waits for the
//!   oldest child's lock under a short `lock_timeout` before it checks the
//!   pin and counts, and skips the pass when a long transaction holds it.
//! - **Tenant isolation**: every per-tenant call reads and writes only that
//!   tenant's events. [`EventStore::event_tenants`] and
//!   [`EventStore::event_purge`] are the system operations.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Opaque, Result};

/// The largest payload an event may carry, in bytes of JSON text, when the
/// caller does not say otherwise (the work item's limit).
pub const EVENT_PAYLOAD_MAX_DEFAULT: usize = drover_core::item::DEFAULT_MAX_PAYLOAD_BYTES;

/// One event to append; `id` is the outbox row's id when relayed
/// (appending the same id twice is a no-op).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// The event's identity within its tenant's log (UUID v7 when minted).
    pub id: Uuid,
    /// The tenant whose log it joins (the nil UUID in single-tenant use).
    pub tenant: Uuid,
    /// What happened (`order_placed`): `[a-z0-9_.:-]{1,128}`, the rule of a
    /// kind's name.
    pub topic: String,
    /// The facts, as JSON.
    pub payload: serde_json::Value,
    /// Who caused it (the nil UUID: the system).
    pub actor: Uuid,
    /// The request that caused it, when known.
    pub request_id: Option<String>,
    /// The W3C trace context of the request that caused it, when known.
    pub traceparent: Option<String>,
}

impl NewEvent {
    /// An event of `topic` with a fresh v7 id, in the nil tenant, by the
    /// system.
    pub fn new(topic: impl Into<String>, payload: serde_json::Value) -> Self {
        NewEvent {
            id: Uuid::now_v7(),
            tenant: Uuid::nil(),
            topic: topic.into(),
            payload,
            actor: Uuid::nil(),
            request_id: None,
            traceparent: None,
        }
    }

    /// The same event in `tenant`'s log.
    #[must_use]
    pub fn in_tenant(mut self, tenant: Uuid) -> Self {
        self.tenant = tenant;
        self
    }

    /// Checks the topic, the payload's size and the trace context.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `topic`, `payload` or `traceparent`.
    pub fn validate(&self, max_payload_bytes: usize) -> Result<()> {
        drover_core::item::validate_kind(&self.topic).map_err(|e| match e {
            Error::InvalidInput { reason, .. } => Error::invalid("topic", reason),
            other => other,
        })?;
        drover_core::item::validate_payload(&self.payload, max_payload_bytes)?;
        if let Some(tp) = &self.traceparent {
            drover_core::trace::TraceParent::parse(tp)
                .map_err(|_| Error::invalid("traceparent", "is not a W3C traceparent"))?;
        }
        Ok(())
    }
}

/// Checks every event of a batch with [`EVENT_PAYLOAD_MAX_DEFAULT`], the
/// event log's own bound: the rule each append entry applies before it
/// writes (the provided appends of [`EventStore`], and PostgreSQL's append
/// on the caller's transaction).
///
/// # Errors
/// The first event's [`NewEvent::validate`] error.
pub fn validate_all(events: &[NewEvent]) -> Result<()> {
    events
        .iter()
        .try_for_each(|e| e.validate(EVENT_PAYLOAD_MAX_DEFAULT))
}

/// An event as the log holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The tenant whose log holds it.
    pub tenant: Uuid,
    /// Its place in the tenant's log: 1, 2, 3 … in commit order.
    pub position: i64,
    /// Its identity within the tenant's log.
    pub id: Uuid,
    /// What happened.
    pub topic: String,
    /// The facts.
    pub payload: serde_json::Value,
    /// Who caused it.
    pub actor: Uuid,
    /// The request that caused it.
    pub request_id: Option<String>,
    /// The trace context of the request that caused it.
    pub traceparent: Option<String>,
    /// When it was appended (the store's clock).
    pub created_at: DateTime<Utc>,
}

/// What one append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventAppended {
    /// Appended at `position`.
    Appended {
        /// Its position in the tenant's log.
        position: i64,
    },
    /// The tenant's log already held an event with this id: nothing changed.
    AlreadyThere {
        /// The existing event's position.
        position: i64,
    },
}

impl EventAppended {
    /// The event's position, appended now or before.
    pub fn position(&self) -> i64 {
        match *self {
            EventAppended::Appended { position } | EventAppended::AlreadyThere { position } => {
                position
            }
        }
    }

    /// True when this call appended the event.
    pub fn is_appended(&self) -> bool {
        matches!(self, EventAppended::Appended { .. })
    }
}

/// The newest end of a tenant's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventHead {
    /// The newest position (0 for an empty log).
    pub position: i64,
    /// When the newest event was appended; `None` for an empty log.
    pub at: Option<DateTime<Utc>>,
}

/// What a retention purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EventPurge {
    /// Events removed.
    pub removed: u64,
    /// True when the oldest retained events are past the retention but a
    /// projector's checkpoint has not passed them yet, so they were kept.
    pub pinned: bool,
    /// True when the purge skipped this pass because its lock was taken
    /// (PostgreSQL: a long transaction holds the oldest child); the next
    /// pass tries again.
    pub busy: bool,
}

/// The event log of the storage seam. Entity-then-verb; see the module docs
/// for the invariants.
///
/// The two appends are provided: they validate here, once for every
/// backend, and then call [`EventStore::event_append_valid`], the one a
/// backend writes.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Appends one event (validated with [`EVENT_PAYLOAD_MAX_DEFAULT`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad topic, payload or trace context
    /// (nothing is written); storage errors.
    async fn event_append(&self, event: &NewEvent) -> Result<EventAppended> {
        event.validate(EVENT_PAYLOAD_MAX_DEFAULT)?;
        let mut out = self.event_append_valid(std::slice::from_ref(event)).await?;
        out.pop()
            .ok_or_else(|| Error::Storage(Opaque::msg("no answer for the append")))
    }

    /// Appends events (of any tenants) in one transaction per store call:
    /// one answer per event, in order. An id repeated within the batch is
    /// appended once (the later copies answer `AlreadyThere`).
    ///
    /// # Errors
    /// As [`EventStore::event_append`]; one invalid event refuses the batch.
    async fn event_append_many(&self, events: &[NewEvent]) -> Result<Vec<EventAppended>> {
        validate_all(events)?;
        self.event_append_valid(events).await
    }

    /// The backend's half of [`EventStore::event_append_many`]: appends
    /// `events`, each already checked by [`validate_all`], as that method
    /// says. Call the provided appends instead; they check first.
    ///
    /// # Errors
    /// Storage errors.
    async fn event_append_valid(&self, events: &[NewEvent]) -> Result<Vec<EventAppended>>;

    /// Events of `tenant` after `after` in position order, never skipping
    /// one that commits later (gap-safe). `topics` empty means every topic;
    /// at most `limit` events.
    async fn event_read(
        &self,
        tenant: Uuid,
        after: i64,
        topics: &[String],
        limit: u32,
    ) -> Result<Vec<Event>>;

    /// The newest position of `tenant`'s log and when it was appended.
    async fn event_head(&self, tenant: Uuid) -> Result<EventHead>;

    /// The tenants whose log holds at least one event, after `after` (by
    /// id; `None`: from the first), at most `limit`, in tenant order (system
    /// operation). Page on the last id returned to visit every tenant.
    async fn event_tenants(&self, after: Option<Uuid>, limit: u32) -> Result<Vec<Uuid>>;

    /// Removes events appended before `before`, oldest first, never one a
    /// known projector has not passed (system operation). A projector is
    /// known once it has a checkpoint row of any tenant or was recorded
    /// alive ([`ProjectorStore::projector_seen`](crate::projector::ProjectorStore::projector_seen));
    /// a tenant without a row of a known projector counts as checkpoint 0,
    /// so a tenant its runner has not reached yet keeps its events. On
    /// PostgreSQL a whole child of the log's ring is truncated at a time, so
    /// events a little younger than `before` may stay until the next child
    /// qualifies; the child's lock is waited for briefly, and a purge that
    /// cannot get it (a long appender or reader) skips the pass
    /// ([`EventPurge::busy`]) rather than queue every appender behind it.
    async fn event_purge(&self, before: DateTime<Utc>) -> Result<EventPurge>;
}
