//! Fair share between tenants as the queue's API steers it: an operator's
//! weight per tenant and its clearing, turning fair share off or on per
//! lane, and the listing of each tenant's share (the records, the rule and
//! the storage seam are [`crate::store::fairness`]'s; the claim that
//! shares is the store's).
//!
//! Invariants: only a principal holding [`OPERATE_PERMISSION`] that is not
//! confined to one tenant may change a weight or a lane (a weight moves
//! every other tenant's share); a weight is validated before the store is
//! asked.

use crate::error::{Error, Result};
use crate::queue::{OPERATE_PERMISSION, Principal, Queue};
use crate::store::fairness::{FairLane, FairSettings, FairShare, FairWeight, validate_weight};
use uuid::Uuid;

impl Queue {
    fn check_fair_operator(principal: &Principal, what: &str) -> Result<()> {
        if !principal.holds(OPERATE_PERMISSION) {
            return Err(Error::Forbidden(format!(
                "{what} requires the permission {OPERATE_PERMISSION:?}"
            )));
        }
        if !principal.tenant.is_nil() && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "a weight moves every tenant's share: a principal of tenant {} may not {what}",
                principal.tenant
            )));
        }
        Ok(())
    }

    /// Sets `tenant`'s weight: inside each lane its starts are in
    /// proportion to it among the tenants with due work (default 1).
    /// Every claimer uses it within one poll interval.
    ///
    /// # Errors
    /// [`Error::Forbidden`] unless the principal holds
    /// [`OPERATE_PERMISSION`] and is not confined to one tenant;
    /// [`Error::InvalidInput`] on a weight outside 1 to
    /// [`MAX_WEIGHT`](crate::store::fairness::MAX_WEIGHT); storage errors.
    pub async fn fair_weight_set(
        &self,
        principal: &Principal,
        tenant: Uuid,
        weight: u32,
    ) -> Result<FairWeight> {
        Self::check_fair_operator(principal, "set a weight")?;
        validate_weight(weight)?;
        let w = self
            .store()
            .fair_weight_set(tenant, weight, principal.actor)
            .await?;
        tracing::info!(%tenant, weight, actor = %principal.actor, "fair-share weight set");
        Ok(w)
    }

    /// Clears `tenant`'s weight (back to 1). Whether it had one.
    ///
    /// # Errors
    /// As [`Queue::fair_weight_set`].
    pub async fn fair_weight_clear(&self, principal: &Principal, tenant: Uuid) -> Result<bool> {
        Self::check_fair_operator(principal, "clear a weight")?;
        let had = self.store().fair_weight_clear(tenant).await?;
        tracing::info!(%tenant, had, actor = %principal.actor, "fair-share weight cleared");
        Ok(had)
    }

    /// Turns fair share on (by tenant) or off for `lane` (off: the lane
    /// claims in priority then age order, as without it).
    ///
    /// # Errors
    /// As [`Queue::fair_weight_set`]; [`Error::InvalidInput`] on a
    /// malformed lane name.
    pub async fn fair_lane_set(
        &self,
        principal: &Principal,
        lane: &str,
        on: bool,
    ) -> Result<FairLane> {
        self.fair_lane_mode_set(principal, lane, on, false).await
    }

    /// Turns fair share on or off for `lane`; on, by tenant or
    /// (`by_group`) by tenant and then, inside each tenant's share, by
    /// group. Every claimer uses it within one poll interval.
    ///
    /// # Errors
    /// As [`Queue::fair_lane_set`]; [`Error::InvalidInput`] on `by_group`
    /// with fair share off.
    pub async fn fair_lane_mode_set(
        &self,
        principal: &Principal,
        lane: &str,
        on: bool,
        by_group: bool,
    ) -> Result<FairLane> {
        Self::check_fair_operator(principal, "turn fair share on or off")?;
        drover_core::item::validate_lane(lane)?;
        if by_group && !on {
            return Err(Error::invalid(
                "by_group",
                "sharing by group needs fair share on",
            ));
        }
        let l = self
            .store()
            .fair_lane_set(lane, on, by_group, principal.actor)
            .await?;
        tracing::info!(lane, on, by_group, actor = %principal.actor, "fair share set for lane");
        Ok(l)
    }

    /// The stored fair-share settings (weights, lanes).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn fair_settings(&self) -> Result<FairSettings> {
        self.store().fair_settings().await
    }

    /// Each tenant's share of each lane: weight, waiting, started.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn fair_shares(&self) -> Result<Vec<FairShare>> {
        self.store().fair_shares().await
    }

    /// Publishes `drover_fair_started{lane,tenant}` and
    /// `drover_fair_waiting{lane,tenant}` for every tenant with a share of
    /// a lane (the sweep's step, so a scrape reads gauges, never the
    /// tables); a pair published before and gone now reads 0. The waiting
    /// gauge counts up to [`FAIR_WAITING_CAP`](crate::store::fairness::FAIR_WAITING_CAP).
    ///
    /// # Errors
    /// Storage errors (nothing is published then).
    pub async fn publish_fair_gauges(&self) -> Result<()> {
        static PUBLISHED: std::sync::Mutex<std::collections::BTreeSet<(String, String)>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let shares = self.store().fair_shares().await?;
        let now: std::collections::BTreeSet<(String, String)> = shares
            .iter()
            .map(|s| (s.lane.clone(), s.tenant.to_string()))
            .collect();
        let mut published = PUBLISHED.lock().unwrap_or_else(|p| p.into_inner());
        for (lane, tenant) in published.iter().filter(|k| !now.contains(*k)) {
            let labels = [("lane", lane.clone()), ("tenant", tenant.clone())];
            metrics::gauge!("drover_fair_started", &labels).set(0.0);
            metrics::gauge!("drover_fair_waiting", &labels).set(0.0);
        }
        for s in &shares {
            let labels = [("lane", s.lane.clone()), ("tenant", s.tenant.to_string())];
            metrics::gauge!("drover_fair_started", &labels).set(s.started as f64);
            metrics::gauge!("drover_fair_waiting", &labels).set(s.waiting as f64);
        }
        *published = now;
        Ok(())
    }
}
