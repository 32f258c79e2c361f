//! Concurrency and rate limits as the queue's API steers them: an
//! operator's setting and its clearing, the code's declaration, and the
//! listing with use (the records, the rule and the storage seam are
//! [`crate::store::limits`]'s; the claim that enforces them is the store's).
//!
//! Invariants: only a principal holding [`OPERATE_PERMISSION`] that is not
//! confined to one tenant may set or clear a limit (a limit counts every
//! tenant's items); the scope's name and the concurrency are validated
//! before the store is asked. Closing a group or a kind until a time
//! (and reopening it) is an operator's act of the same kind.

use crate::error::{Error, Result};
use crate::queue::{OPERATE_PERMISSION, Principal, Queue};
use crate::store::limits::{LimitScope, LimitSetting, LimitSource, LimitSpec, LimitUsage};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::closures::Closure;
use crate::store::rates::{Rate, RateSetting, RateUsage};

impl Queue {
    fn check_limit_operator(principal: &Principal, what: &str) -> Result<()> {
        if !principal.holds(OPERATE_PERMISSION) {
            return Err(Error::Forbidden(format!(
                "{what} requires the permission {OPERATE_PERMISSION:?}"
            )));
        }
        if !principal.tenant.is_nil() && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "a limit counts every tenant's items: a principal of tenant {} may not {what}",
                principal.tenant
            )));
        }
        Ok(())
    }

    /// Sets the operator's limit for `scope` (a concurrency, or an ordered
    /// group: [`LimitSpec::ordered`]): it wins over the one declared in
    /// code until [`Queue::limit_clear`]. Every claimer enforces it within
    /// one poll interval; claims already made run on.
    ///
    /// # Errors
    /// [`Error::Forbidden`] unless the principal holds
    /// [`OPERATE_PERMISSION`] and is not confined to one tenant;
    /// [`Error::InvalidInput`] on a malformed name, a concurrency outside
    /// 1 to [`MAX_CONCURRENCY`](crate::store::limits::MAX_CONCURRENCY), or
    /// an order asked of a scope that is not a per-group limit of 1;
    /// storage errors.
    pub async fn limit_set(
        &self,
        principal: &Principal,
        scope: &LimitScope,
        spec: impl Into<LimitSpec>,
    ) -> Result<LimitSetting> {
        let spec = spec.into();
        Self::check_limit_operator(principal, "set a limit")?;
        scope.validate()?;
        spec.validate(scope)?;
        let s = self
            .store()
            .limit_set(scope, LimitSource::Operator, spec, principal.actor)
            .await?;
        tracing::info!(%scope, %spec, actor = %principal.actor, "limit set");
        Ok(s)
    }

    /// Clears the operator's setting of `scope` (the code's, if any, is in
    /// force again). Whether there was one.
    ///
    /// # Errors
    /// As [`Queue::limit_set`].
    pub async fn limit_clear(&self, principal: &Principal, scope: &LimitScope) -> Result<bool> {
        Self::check_limit_operator(principal, "clear a limit")?;
        scope.validate()?;
        let had = self
            .store()
            .limit_clear(scope, LimitSource::Operator)
            .await?;
        tracing::info!(%scope, had, actor = %principal.actor, "limit cleared");
        Ok(had)
    }

    /// Records the limit the code declares for `scope` (a worker at its
    /// start); an operator's setting still wins.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`Queue::limit_set`]; storage errors.
    pub async fn limit_declare(
        &self,
        scope: &LimitScope,
        spec: impl Into<LimitSpec>,
    ) -> Result<LimitSetting> {
        let spec = spec.into();
        scope.validate()?;
        spec.validate(scope)?;
        self.store()
            .limit_set(scope, LimitSource::Code, spec, uuid::Uuid::nil())
            .await
    }

    /// Every limit in force, with the slots held now and the items waiting.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn limits(&self) -> Result<Vec<LimitUsage>> {
        self.store().limit_usage().await
    }

    /// Sets the operator's rate for `scope`: it wins over the one declared
    /// in code until [`Queue::rate_clear`]. Every claimer enforces it
    /// within one poll interval, on the database clock.
    ///
    /// # Errors
    /// [`Error::Forbidden`] as [`Queue::limit_set`];
    /// [`Error::InvalidInput`] on a malformed name or a rate out of range
    /// ([`Rate::validate`]); storage errors.
    pub async fn rate_set(
        &self,
        principal: &Principal,
        scope: &LimitScope,
        rate: Rate,
    ) -> Result<RateSetting> {
        Self::check_limit_operator(principal, "set a rate")?;
        scope.validate()?;
        rate.validate()?;
        let s = self
            .store()
            .rate_set(scope, LimitSource::Operator, rate, principal.actor)
            .await?;
        tracing::info!(%scope, %rate, actor = %principal.actor, "rate set");
        Ok(s)
    }

    /// Clears the operator's rate of `scope` (the code's, if any, is in
    /// force again). Whether there was one.
    ///
    /// # Errors
    /// As [`Queue::rate_set`].
    pub async fn rate_clear(&self, principal: &Principal, scope: &LimitScope) -> Result<bool> {
        Self::check_limit_operator(principal, "clear a rate")?;
        scope.validate()?;
        let had = self
            .store()
            .rate_clear(scope, LimitSource::Operator)
            .await?;
        tracing::info!(%scope, had, actor = %principal.actor, "rate cleared");
        Ok(had)
    }

    /// Records the rate the code declares for `scope` (a worker at its
    /// start); an operator's rate still wins.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] as [`Queue::rate_set`]; storage errors.
    pub async fn rate_declare(&self, scope: &LimitScope, rate: Rate) -> Result<RateSetting> {
        scope.validate()?;
        rate.validate()?;
        self.store()
            .rate_set(scope, LimitSource::Code, rate, uuid::Uuid::nil())
            .await
    }

    /// Every rate in force, with when each next allows a start.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn rates(&self) -> Result<Vec<RateUsage>> {
        self.store().rate_usage().await
    }

    /// Closes `kind` (`group: None`: every group and item of it) or
    /// `tenant`'s `group` of it until `until`, as an operator: from the
    /// close on, no claim takes an item it holds before `until` on the
    /// database clock; it replaces a closure in force (docs/flow-control.md,
    /// "Closing a group").
    ///
    /// # Errors
    /// [`Error::Forbidden`] as [`Queue::limit_set`];
    /// [`Error::InvalidInput`] on a malformed kind or group; storage
    /// errors.
    pub async fn close_until(
        &self,
        principal: &Principal,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
        until: DateTime<Utc>,
    ) -> Result<Closure> {
        Self::check_limit_operator(principal, "close a group")?;
        check_closure_target(kind, group)?;
        let c = self
            .store()
            .close_until(kind, tenant, group, until, None, principal.actor)
            .await?;
        tracing::info!(closure = %c, actor = %principal.actor, "closed");
        Ok(c)
    }

    /// Reopens `kind` or `tenant`'s `group` of it at once; whether a
    /// closure was in force.
    ///
    /// # Errors
    /// As [`Queue::close_until`].
    pub async fn reopen(
        &self,
        principal: &Principal,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
    ) -> Result<bool> {
        Self::check_limit_operator(principal, "reopen a group")?;
        check_closure_target(kind, group)?;
        let had = self.store().reopen(kind, tenant, group).await?;
        tracing::info!(kind, %tenant, group, had, actor = %principal.actor, "reopened");
        Ok(had)
    }

    /// The closures in force, by key.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn closures(&self) -> Result<Vec<Closure>> {
        self.store().closures().await
    }

    /// Publishes `drover_limit_in_use{scope}` and
    /// `drover_limit_waiting{scope}` for every limit in force (the sweep's
    /// step, so a scrape reads gauges, never the table); a limit published
    /// before and gone now reads 0.
    ///
    /// # Errors
    /// Storage errors (nothing is published then).
    pub async fn publish_limit_gauges(&self) -> Result<()> {
        static PUBLISHED: std::sync::Mutex<std::collections::BTreeSet<String>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let usage = self.store().limit_usage().await?;
        let now: std::collections::BTreeSet<String> =
            usage.iter().map(|u| u.setting.scope.to_string()).collect();
        let mut published = PUBLISHED.lock().unwrap_or_else(|p| p.into_inner());
        for gone in published.iter().filter(|s| !now.contains(*s)) {
            metrics::gauge!("drover_limit_in_use", "scope" => gone.clone()).set(0.0);
            metrics::gauge!("drover_limit_waiting", "scope" => gone.clone()).set(0.0);
        }
        for u in &usage {
            let scope = u.setting.scope.to_string();
            metrics::gauge!("drover_limit_in_use", "scope" => scope.clone()).set(u.in_use as f64);
            metrics::gauge!("drover_limit_waiting", "scope" => scope).set(u.waiting as f64);
        }
        *published = now;
        Ok(())
    }
}

/// A closure names a valid kind and, if any, a valid group (the names
/// items carry: no `@`, which ends a cell key's scope).
fn check_closure_target(kind: &str, group: Option<&str>) -> Result<()> {
    LimitScope::Kind(kind.to_owned()).validate()?;
    if let Some(g) = group {
        crate::item::validate_group(g)?;
    }
    Ok(())
}
