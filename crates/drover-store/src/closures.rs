//! Closing a group (or a kind) until a time: the closure entity of the
//! storage seam ([`Closure`], [`ClosureStore`]) and how it rides on the
//! rate limits' cells (`rates.rs`).
//!
//! A closure is a rate cell whose next allowed start is the closing time:
//! the cell of key `kind:<kind>@closed` (a kind) or
//! `group:<kind>:<tenant>:<group>@closed` (one group of a tenant), its
//! `tat` the time the scope reopens, its `closed_by` the actor and
//! `closed_by_item` the item whose handler closed it (none for an
//! operator). The rates in force a claimer reads carry one synthetic
//! setting of rate [`Rate::CLOSED`] per kind with a closure in force
//! ([`with_closures`]), so the claim admits through the same cells: a
//! closed scope's cell holds every start back until its `tat` and moves
//! for none.
//!
//! Invariants every backend keeps (contract cases in
//! `contract/closures.rs`):
//! - "Now" is the store's clock read inside the claim, as for the rates;
//!   an item of a closed scope is not claimed before the closing time and
//!   spends no attempt.
//! - A claim that locks the closure's cell after the close committed reads
//!   it (PostgreSQL: the cell's row lock; SQLite: the single writer;
//!   memory: the store's lock). A close reaches the claimers of the
//!   process that made it at once, and of other processes within the
//!   rates' cache TTL (500 ms), as a new rate does.
//! - A handler's close only moves a closure later; an operator's sets it.
//!   Reopening deletes the cell. A closure past its time is an idle cell:
//!   the sweep collects it (`rate_cells_purge`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::limits::{LimitScope, LimitSource};
use crate::rates::{Rate, RateSetting};
use drover_core::error::Result;

pub use crate::rates::CLOSED_SUFFIX;

/// A group (`group: Some`) or a kind closed until a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closure {
    /// The kind.
    pub kind: String,
    /// The group's tenant (nil for a kind closure).
    pub tenant_id: Uuid,
    /// The group; `None`: every group (and item) of the kind.
    pub group: Option<String>,
    /// When it reopens (the store's clock).
    pub until: DateTime<Utc>,
    /// Who closed it (the actor of the item's run, or the operator).
    pub closed_by: Uuid,
    /// The item whose handler closed it; `None` for an operator.
    pub closed_by_item: Option<Uuid>,
}

impl Closure {
    /// Its cell key.
    pub fn key(&self) -> String {
        closure_key(&self.kind, self.tenant_id, self.group.as_deref())
    }
}

impl std::fmt::Display for Closure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.group {
            Some(g) => write!(f, "group {g} of kind {}", self.kind)?,
            None => write!(f, "kind {}", self.kind)?,
        }
        write!(f, " closed until {}", self.until.to_rfc3339())?;
        if let Some(item) = self.closed_by_item {
            write!(f, " by item {item}")?;
        }
        Ok(())
    }
}

/// The cell key of a closure of `kind` (`group: None`) or of one group of
/// `tenant`.
pub fn closure_key(kind: &str, tenant: Uuid, group: Option<&str>) -> String {
    match group {
        Some(g) => format!("group:{kind}:{tenant}:{g}{CLOSED_SUFFIX}"),
        None => format!("kind:{kind}{CLOSED_SUFFIX}"),
    }
}

/// The (kind, tenant, group) a closure's cell key names; `None` for a key
/// that is not a closure's. A kind may hold `:`: the tenant is the first
/// 36 characters after a `:` that read as a UUID followed by `:`.
pub fn parse_closure_key(key: &str) -> Option<(String, Uuid, Option<String>)> {
    let body = key.strip_suffix(CLOSED_SUFFIX)?;
    if let Some(kind) = body.strip_prefix("kind:") {
        return Some((kind.to_owned(), Uuid::nil(), None));
    }
    let rest = body.strip_prefix("group:")?;
    for (i, _) in rest.match_indices(':') {
        let after = &rest[i + 1..];
        if after.len() > 37
            && after.as_bytes()[36] == b':'
            && let Some(Ok(tenant)) = after.get(..36).map(Uuid::parse_str)
        {
            return Some((rest[..i].to_owned(), tenant, Some(after[37..].to_owned())));
        }
    }
    None
}

/// `rates` (the rates in force) with one setting of [`Rate::CLOSED`] per
/// scope that a closure among `keys` (the closures' cell keys in force)
/// names: a kind (`Kind`) or a group of it (`KindPerGroup`).
pub fn with_closures<'a>(
    mut rates: Vec<RateSetting>,
    keys: impl IntoIterator<Item = &'a str>,
) -> Vec<RateSetting> {
    for key in keys {
        let Some((kind, _, group)) = parse_closure_key(key) else {
            continue;
        };
        let scope = match group {
            Some(_) => LimitScope::KindPerGroup(kind),
            None => LimitScope::Kind(kind),
        };
        if rates
            .iter()
            .any(|r| r.rate.is_closure() && r.scope == scope)
        {
            continue;
        }
        rates.push(RateSetting {
            scope,
            source: LimitSource::Operator,
            rate: Rate::CLOSED,
            set_at: DateTime::<Utc>::UNIX_EPOCH,
            set_by: Uuid::nil(),
        });
    }
    rates
}

/// The closure among `closures` (those in force) that holds back an item
/// of `kind`, `tenant` and `group` at `now`: its group's, else its kind's.
pub fn closure_of<'a>(
    closures: &'a [Closure],
    kind: &str,
    tenant: Uuid,
    group: Option<&str>,
    now: DateTime<Utc>,
) -> Option<&'a Closure> {
    let live = |c: &&Closure| c.until > now && c.kind == kind;
    closures
        .iter()
        .filter(live)
        .find(|c| c.group.is_some() && c.group.as_deref() == group && c.tenant_id == tenant)
        .or_else(|| closures.iter().filter(live).find(|c| c.group.is_none()))
}

/// The closure entity of the storage seam (system operations).
#[async_trait]
pub trait ClosureStore: Send + Sync {
    /// Closes `kind` (`group: None`) or `tenant`'s `group` of it until
    /// `until`. A handler's close (`by_item: Some`) only moves a closure in
    /// force later; an operator's (`None`) sets it. Returns the closure as
    /// stored.
    async fn close_until(
        &self,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
        until: DateTime<Utc>,
        by_item: Option<Uuid>,
        actor: Uuid,
    ) -> Result<Closure>;

    /// Reopens `kind` or `tenant`'s `group` of it at once; whether a
    /// closure was in force.
    async fn reopen(&self, kind: &str, tenant: Uuid, group: Option<&str>) -> Result<bool>;

    /// The closures in force on the store's clock, by key.
    async fn closures(&self) -> Result<Vec<Closure>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_back() {
        let t = Uuid::from_u128(5);
        let k = closure_key("a:b", t, Some("c:d"));
        assert_eq!(
            parse_closure_key(&k),
            Some(("a:b".to_owned(), t, Some("c:d".to_owned())))
        );
        assert_eq!(
            parse_closure_key(&closure_key("k", Uuid::nil(), None)),
            Some(("k".to_owned(), Uuid::nil(), None))
        );
        assert_eq!(parse_closure_key("kind:k@1/1/1"), None);
        let rates = with_closures(Vec::new(), [k.as_str(), k.as_str()]);
        assert_eq!(rates.len(), 1);
        assert_eq!(rates[0].scope, LimitScope::KindPerGroup("a:b".into()));
        assert_eq!(rates[0].rate.cell_suffix(), CLOSED_SUFFIX);
    }

    #[test]
    fn a_closed_cell_admits_at_its_time_and_never_moves() {
        let at = |us| DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::microseconds(us);
        let key = [("kind:k@closed".to_owned(), Rate::CLOSED)];
        let mut before = crate::rates::Cells::new(at(9), [(key[0].0.clone(), at(10))]);
        assert!(!before.admit(&key));
        let mut then = crate::rates::Cells::new(at(10), [(key[0].0.clone(), at(10))]);
        assert!(then.admit(&key) && then.admit(&key), "no limit once open");
        assert!(then.changed().is_empty());
    }
}
