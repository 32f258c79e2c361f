//! The checkpoint entity of the storage seam: one row per (projector,
//! tenant) holding the last position applied and the lease of the one
//! runner allowed to move it.
//!
//! Invariants every backend keeps (the contract cases in
//! `store/contract/events.rs` check each):
//!
//! - [`ProjectorStore::projector_lease_take`] succeeds only while the row's
//!   lease is free or passed (the store's clock); two takers racing: one
//!   wins.
//! - [`ProjectorStore::projector_apply`] and
//!   [`ProjectorStore::projector_rebuild`] are fenced on the lease token, on
//!   the lease not having passed and on the checkpoint still being the one
//!   the lease carries; otherwise they change nothing (the projection
//!   included, where it shares the transaction) and return
//!   [`Error::Conflict`](crate::Error::Conflict). Both renew the lease.
//! - The checkpoint only moves forward, except to 0 by a rebuild.
//! - Per tenant: a call under tenant A never reads or moves tenant B's
//!   rows. [`ProjectorStore::projector_checkpoints`] and
//!   [`ProjectorStore::projector_request_rebuild`] without a tenant are the
//!   system operations.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Projector;
use crate::error::Result;
use crate::events::Event;

/// What [`ProjectorStore::projector_lease_take`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseParams {
    /// The projector.
    pub projector: String,
    /// The tenant whose log it follows.
    pub tenant: Uuid,
    /// Who takes it (the worker id), for `drover projector status`.
    pub holder: String,
    /// How long the lease lasts unless renewed.
    pub lease: Duration,
}

/// A held lease: the fence every write of the runner carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectorLease {
    /// The projector.
    pub projector: String,
    /// The tenant.
    pub tenant: Uuid,
    /// The lease's token (fresh and random per take).
    pub token: Uuid,
    /// The checkpoint: the last position applied.
    pub position: i64,
    /// True when an operator asked for a rebuild that has not run yet.
    pub rebuild_requested: bool,
}

/// A checkpoint row, as `drover projector status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRow {
    /// The projector.
    pub projector: String,
    /// The tenant.
    pub tenant: Uuid,
    /// The last position applied.
    pub position: i64,
    /// The runner holding the lease, while one does.
    pub holder: Option<String>,
    /// When that lease passes.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// A rebuild is asked for and has not run yet.
    pub rebuild_requested: bool,
    /// Rebuilds run so far.
    pub rebuilds: i32,
    /// When a batch was last applied.
    pub applied_at: Option<DateTime<Utc>>,
}

/// A projector's lag over every tenant, as one aggregate read returns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectorLag {
    /// Tenants whose head is past the projector's checkpoint (a tenant
    /// without a checkpoint row counts from 0).
    pub tenants: u64,
    /// Events behind the heads, summed over those tenants.
    pub behind_events: i64,
    /// Age of the oldest retained event not applied yet, over those
    /// tenants, on the store's clock (0 when caught up).
    pub behind_seconds: f64,
}

/// The checkpoints and leases of the storage seam. Entity-then-verb; see the
/// module docs for the invariants.
#[async_trait]
pub trait ProjectorStore: Send + Sync {
    /// Takes the lease of (projector, tenant), creating the row at
    /// checkpoint 0 on first use; `None` while another runner holds it.
    async fn projector_lease_take(&self, params: &LeaseParams) -> Result<Option<ProjectorLease>>;

    /// Gives the lease up (fenced on its token); a lease already lost is
    /// not an error.
    async fn projector_lease_release(&self, lease: &ProjectorLease) -> Result<()>;

    /// In one transaction (same database): moves the checkpoint from
    /// `lease.position` to the last event's position and runs
    /// `projector.apply` for each event, in order; renews the lease for
    /// `renew`. Returns the lease with the new checkpoint (and the current
    /// rebuild flag).
    ///
    /// # Errors
    /// [`Error::Conflict`](crate::Error::Conflict) when the lease is lost,
    /// passed or the checkpoint moved (nothing applied); the projector's own
    /// error (nothing applied, checkpoint unmoved).
    async fn projector_apply(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        events: &[Event],
        projector: &dyn Projector,
    ) -> Result<ProjectorLease>;

    /// In one transaction: runs `projector.reset(tenant)`, moves the
    /// checkpoint to 0, clears the rebuild flag and counts the rebuild;
    /// renews the lease. Fenced as [`ProjectorStore::projector_apply`].
    async fn projector_rebuild(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        projector: &dyn Projector,
    ) -> Result<ProjectorLease>;

    /// Asks the runners of `projector` to rebuild: for `tenant`, or every
    /// tenant with a checkpoint when `None` (system operation). For one
    /// tenant the row is created if missing, so a rebuild asked before the
    /// first run is not lost. Returns the rows flagged.
    async fn projector_request_rebuild(&self, projector: &str, tenant: Option<Uuid>)
    -> Result<u64>;

    /// Every checkpoint row, of one projector or all, by projector then
    /// tenant (system operation).
    async fn projector_checkpoints(&self, projector: Option<&str>) -> Result<Vec<CheckpointRow>>;

    /// The runner's discovery page (system operation): tenants after
    /// `after` (by id; `None`: from the first) whose log's head is past
    /// `projector`'s checkpoint (none yet: 0) or whose rebuild is asked, at
    /// most `limit`, in tenant order. Tenants caught up are not returned, so
    /// paging on the last id returned visits every tenant with work.
    async fn projector_pending(
        &self,
        projector: &str,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Uuid>>;

    /// `projector`'s lag over every tenant in one aggregate read (system
    /// operation): the tenants behind, the events behind, and the age of
    /// the oldest event not applied yet.
    async fn projector_lag(&self, projector: &str) -> Result<ProjectorLag>;

    /// Records that a runner of `projector` is alive, on the store's clock
    /// (system operation). A projector recorded alive pins the event purge
    /// for every tenant, and its checkpoints are never forgotten.
    async fn projector_seen(&self, projector: &str) -> Result<()>;

    /// Retention of removed projectors (system operation): deletes the
    /// checkpoint rows, last written before `before`, of every projector no
    /// runner has recorded alive since `before`, and those projectors'
    /// records. Returns the checkpoint rows deleted. Their pin on the event
    /// purge goes with them.
    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64>;
}
