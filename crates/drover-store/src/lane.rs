//! The lane state entity of the storage seam: [`LaneState`], what
//! [`LaneStore::lane_set`] records ([`LaneSetParams`]) and the [`LaneStore`]
//! trait (system operations; one row per lane that was ever paused or
//! resumed, owned by the nil tenant). `crate::lane` re-exports these under
//! their old paths and states the invariants; the contract cases in
//! `store/contract/lanes.rs` check each backend.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::Result;

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
