//! Lanes as an operator steers them: pause and resume, persisted.
//!
//! A lane exists implicitly (items name it); this module owns only its
//! operational state, one row per lane that was ever paused or resumed. A
//! lane with no row is running.
//!
//! The state is **installation-wide in meaning, tenant-scoped in form**: a
//! lane is shared by every tenant's items and drained by workers claiming
//! across tenants (a system operation), so pausing it stops it for all of
//! them. Every row belongs to the nil tenant (a `tenant_id` column and, on
//! PostgreSQL, row-level security like every table); the store reads and
//! writes it under the system role, as it does the workers table. For the
//! same reason only a principal that is not confined to one tenant may
//! pause or resume ([`Queue::lane_pause`](crate::Queue::lane_pause); the
//! queue's lane API lives in `queue/lanes.rs`).
//!
//! Invariants (the contract cases in `store/contract/lanes.rs` check each
//! backend):
//!
//! - Pausing a paused lane, or resuming a running one, changes nothing but
//!   the stamp of who asked last; the answer is the row as it now stands.
//! - No worker claims from a paused lane once it has seen the pause: each
//!   worker re-reads the paused set once per poll interval (not per item,
//!   so the claim statement stays as cheap as before), so a pause is
//!   honoured within one poll interval; items already claimed run on.
//!   [`Queue::claim`](crate::Queue::claim) itself does not consult the
//!   state: a caller claiming by hand decides for itself.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Result;

/// A lane's recorded state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneState {
    /// The lane.
    pub lane: String,
    /// Whether workers are to leave it alone.
    pub paused: bool,
    /// When it was last paused or resumed (the store's clock; the database
    /// clock on PostgreSQL).
    pub changed_at: DateTime<Utc>,
    /// Who paused or resumed it last (nil for the system).
    pub changed_by: Uuid,
}

/// What [`LaneStore::lane_set`] is asked to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneSetParams {
    /// The lane (validated already).
    pub lane: String,
    /// Paused (`true`) or running.
    pub paused: bool,
    /// Who asks.
    pub actor: Uuid,
}

/// The lane state entity of the storage seam (system operations).
/// Entity-then-verb; see the module docs for the invariants.
#[async_trait]
pub trait LaneStore: Send + Sync {
    /// Records a lane as paused or running (insert or update), stamping the
    /// store's clock and the actor. Returns the row.
    async fn lane_set(&self, params: &LaneSetParams) -> Result<LaneState>;

    /// Every lane with a recorded state, by name.
    async fn lane_list(&self) -> Result<Vec<LaneState>>;
}
