//! The transactional outbox: a producer writes its own row and an outbox row
//! in one transaction, and the relay turns the outbox row into a work item
//! (`work.<kind>`) or an event (`event.<topic>`) under the row's own id.
//!
//! This module owns the outbox row and its statuses, the storage seam for
//! it ([`OutboxStore`], a supertrait of [`Store`](crate::Store)) and the
//! relay service ([`Relay`]). The typed writers ([`Queue::outbox_work_in`](crate::Queue::outbox_work_in),
//! [`Queue::outbox_event_in`](crate::Queue::outbox_event_in) and their own-transaction twins) are the
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

mod as_service;
mod relay;
mod sweep;

pub use crate::queue::OutboxConnection;
pub use crate::store::outbox::{
    EVENT_PREFIX, LANE_ENTRY, NewOutboxRow, OUTBOX_WAKE, OutboxClaim, OutboxClaimParams,
    OutboxFailOutcome, OutboxFailParams, OutboxFilter, OutboxRow, OutboxStats, OutboxStatus,
    OutboxStore, OutboxTarget, RelayBatch, RelayPlan, RelayPlanner, RelayTally, WORK_PREFIX,
    relayed_event, relayed_item,
};
pub(crate) use as_service::{RelayKnobs, relay_service};
pub use relay::{
    RELAY_BACKOFF_BASE_DEFAULT, RELAY_BACKOFF_CAP_DEFAULT, RELAY_BATCH_DEFAULT, RELAY_BATCH_MAX,
    RELAY_CONCURRENCY_DEFAULT, RELAY_INTERVAL_DEFAULT, RELAY_JITTER, RELAY_LEASE_DEFAULT,
    RELAY_MAX_ATTEMPTS_DEFAULT, RELAY_RETENTION_DEFAULT, RELAY_RETRY_MIN, RELAY_STRATEGY,
    RELAY_SWEEP_BATCHES_DEFAULT, RELAY_SWEEP_BATCHES_MAX, RELAY_SWEEP_BUDGET_DEFAULT, Relay,
    RelayConfig, RelayReport, relay_role,
};
pub use sweep::{RelaySweep, RelaySweepReport};
