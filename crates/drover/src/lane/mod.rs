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
//! pause or resume ([`Queue::lane_pause`]).
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
//!   [`Queue::claim`] itself does not consult the state: a caller claiming
//!   by hand decides for itself.

use crate::error::{Error, Result};
use crate::queue::{OPERATE_PERMISSION, Principal, Queue};

pub use crate::store::lane::{LaneSetParams, LaneState, LaneStore};

impl Queue {
    /// Checks that `principal` may steer lanes: it holds
    /// [`OPERATE_PERMISSION`] and is not confined to one tenant (a lane is
    /// shared by every tenant's items).
    fn check_lane_operator(principal: &Principal, what: &str) -> Result<()> {
        if !principal.holds(OPERATE_PERMISSION) {
            return Err(Error::Forbidden(format!(
                "{what} requires the permission {OPERATE_PERMISSION:?}"
            )));
        }
        if !principal.tenant.is_nil() && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "a lane is shared by every tenant: a principal of tenant {} may not {what}",
                principal.tenant
            )));
        }
        Ok(())
    }

    async fn lane_set(&self, principal: &Principal, lane: &str, paused: bool) -> Result<LaneState> {
        let what = if paused {
            "pause a lane"
        } else {
            "resume a lane"
        };
        Self::check_lane_operator(principal, what)?;
        crate::item::validate_lane(lane)?;
        let state = self
            .store()
            .lane_set(&LaneSetParams {
                lane: lane.to_owned(),
                paused,
                actor: principal.actor,
            })
            .await?;
        tracing::info!(lane, paused, actor = %principal.actor, "lane state changed");
        Ok(state)
    }

    /// Pauses `lane`: every worker stops claiming from it within one poll
    /// interval (items already claimed run on). Persisted; idempotent.
    ///
    /// # Errors
    /// [`Error::Forbidden`] unless the principal holds
    /// [`OPERATE_PERMISSION`] and is not confined to one tenant;
    /// [`Error::InvalidInput`] on a malformed lane; storage errors.
    ///
    /// # Cancel safety
    /// One statement: dropped, it either landed or did not.
    pub async fn lane_pause(&self, principal: &Principal, lane: &str) -> Result<LaneState> {
        self.lane_set(principal, lane, true).await
    }

    /// Resumes `lane`: workers claim from it again within one poll
    /// interval. Persisted; idempotent.
    ///
    /// # Errors
    /// As [`Queue::lane_pause`].
    ///
    /// # Cancel safety
    /// As [`Queue::lane_pause`].
    pub async fn lane_resume(&self, principal: &Principal, lane: &str) -> Result<LaneState> {
        self.lane_set(principal, lane, false).await
    }

    /// Every lane with a recorded state (paused, or resumed after a pause),
    /// by name. A lane not listed has never been paused: it runs.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn lane_list(&self) -> Result<Vec<LaneState>> {
        self.store().lane_list().await
    }

    /// The names of the paused lanes.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn lanes_paused(&self) -> Result<Vec<String>> {
        Ok(self
            .lane_list()
            .await?
            .into_iter()
            .filter(|l| l.paused)
            .map(|l| l.lane)
            .collect())
    }
}
