//! Lanes as the queue's API steers them: pause, resume and the listing
//! (the state and its storage seam are [`crate::lane`]'s).
//!
//! Invariant: only a principal holding [`OPERATE_PERMISSION`] that is not
//! confined to one tenant may pause or resume (a lane is shared by every
//! tenant's items); the lane's name is validated before the store is asked.

use crate::error::{Error, Result};
use crate::queue::{OPERATE_PERMISSION, Principal, Queue};
use crate::store::lane::{LaneSetParams, LaneState};

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
