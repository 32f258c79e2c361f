//! Projectors: code that follows the event log ([`crate::events`]) in
//! position order and keeps a projection (a read model) up to date, with a
//! checkpoint per (projector, tenant).
//!
//! # What this module owns
//!
//! The [`Projector`] trait and its declared [`ProjectorStrategy`], the
//! transaction handed to `apply` ([`ProjectionTx`]), the storage seam of the
//! checkpoints and their leases ([`ProjectorStore`], the store's), and the
//! runner the worker starts beside its claim loop ([`ProjectorRunner`], in
//! `runner.rs`). The operator's read of where a projector stands
//! ([`status`], [`TenantStatus`]) is the queue's (`queue/projector.rs`,
//! behind [`Queue::projector_status`](crate::Queue::projector_status)) and
//! re-exported here.
//!
//! # Invariants
//!
//! - **Exactly once when the projection shares the database.** On PostgreSQL
//!   and SQLite, [`ProjectorStore::projector_apply`] moves the checkpoint
//!   (fenced on the runner's lease token, on the lease not having passed on
//!   the database clock, and on the checkpoint being where the runner read
//!   it) and runs `apply` for every event of the batch **in one
//!   transaction**: a crash rolls back both, so no event is applied twice
//!   or skipped, and the checkpoint is never ahead of the projection.
//! - **At least once otherwise.** A projection kept elsewhere (another
//!   database, a search index, the memory store's [`ProjectionTx::Detached`])
//!   is written before the checkpoint commits; a crash between the two
//!   replays the batch, so `apply` must be idempotent there (key the writes
//!   on `event.id` or `event.position`).
//! - **One runner per (projector, tenant) across the fleet**: a lease row on
//!   the database clock, taken only when free or passed, renewed by every
//!   batch; a runner that lost it gets [`Error::Conflict`] and stops.
//! - **Never skip**: a batch whose `apply` fails (an error, or a panic the
//!   runner contains) is rolled back and retried after a per-tenant
//!   backoff; the projector stalls on a poison event (its lag gauge and
//!   `drover_projector_failing_tenants` grow, `/healthz` names it) rather
//!   than pass it, and its other tenants go on.
//! - **Every tenant**: a pass pages through every tenant behind its head;
//!   the retention purge never removes an event a known projector (one with
//!   a checkpoint row anywhere, or recorded alive) has not passed, a tenant
//!   without a checkpoint row of its own counting as position 0.
//! - **Rebuild** (`drover projector rebuild NAME`) sets a flag on the
//!   checkpoint rows; the runner holding the lease then calls
//!   [`Projector::reset`] and moves the checkpoint to 0 in one transaction,
//!   and replays the retained log while new events keep arriving behind it.

use crate::error::{Error, Result};

mod as_service;
mod runner;

pub use crate::queue::projector::{TenantStatus, status};
pub use crate::store::projector::{
    CheckpointRow, LeaseParams, ProjectionTx, Projector, ProjectorLag, ProjectorLease,
    ProjectorStore, ProjectorStrategy, apply_failed,
};
pub use runner::{
    PROJECTOR_BACKOFF_BASE_DEFAULT, PROJECTOR_BACKOFF_CAP_DEFAULT, PROJECTOR_BATCH_DEFAULT,
    PROJECTOR_BATCH_MAX, PROJECTOR_BATCH_SQLITE_DEFAULT, PROJECTOR_INTERVAL_DEFAULT,
    PROJECTOR_LEASE_DEFAULT, PROJECTOR_MAX_BATCHES_DEFAULT, PROJECTOR_MAX_BATCHES_MAX,
    PROJECTOR_TENANT_PAGE_DEFAULT, PROJECTOR_TENANT_PAGE_MAX, ProjectorConfig, ProjectorReport,
    ProjectorRunner,
};

/// A projector's strategies as `drover handlers` lists a role's (role
/// `projector`): the four every role declares, then rebuild and lag.
pub fn strategy_role(strategy: &ProjectorStrategy, projector: &str) -> crate::worker::RoleInfo {
    crate::worker::RoleInfo {
        role: "projector".into(),
        name: projector.into(),
        strategies: strategy
            .fields()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// Checks a projector's name and strategy, as the worker does before
/// starting its runner.
///
/// # Errors
/// [`Error::InvalidInput`] on `projector` for a bad name; [`Error::Config`]
/// for a blank strategy.
pub fn validate(p: &dyn Projector) -> Result<()> {
    crate::item::validate_kind(p.name()).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid("projector", reason),
        other => other,
    })?;
    for t in p.topics() {
        crate::item::validate_kind(&t).map_err(|e| match e {
            Error::InvalidInput { reason, .. } => Error::invalid("topic", reason),
            other => other,
        })?;
    }
    p.strategy().check(p.name())
}
