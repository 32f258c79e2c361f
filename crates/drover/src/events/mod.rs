//! The event log: an append-only, per-tenant sequence of facts that
//! projectors follow by position, and its entity of the storage seam
//! ([`EventStore`]).
//!
//! # What this module owns
//!
//! The event types ([`NewEvent`], [`Event`], [`EventAppended`],
//! [`EventHead`]) and the [`EventStore`] trait every backend implements
//! (`store/postgres/events.rs`, `store/sqlite/events.rs`,
//! `store/memory/events.rs`). The relay of the outbox appends to it; the
//! projector runner (`crate::projector`) reads from it.
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

mod retention;
pub use retention::{CHECKPOINT_FORGET_MIN, EVENT_RETENTION_MIN, EventRetention};

pub use crate::store::events::{
    EVENT_PAYLOAD_MAX_DEFAULT, Event, EventAppended, EventHead, EventPurge, EventStore, NewEvent,
};
