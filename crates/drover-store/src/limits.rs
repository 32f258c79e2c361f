//! The concurrency-limit entity of the storage seam: what a limit applies
//! to ([`LimitScope`]), who set it ([`LimitSource`]), its record
//! ([`LimitRow`]) and the [`LimitStore`] trait, plus the pure rule every
//! backend's claim admits by ([`Admission`]).
//!
//! A limit is **system-wide** (owned by the nil tenant, like a lane's
//! state): "at most 20 calls into the payment provider" counts every
//! tenant's items. A scope has at most two settings, one declared in code
//! and one set by an operator; the operator's wins until cleared
//! ([`effective`]).
//!
//! Invariants every backend keeps (contract cases in
//! `contract/limits.rs`):
//! - A slot is held by a claim: an item counts against every limit that
//!   applies to it from the claim (prefetched items included) until the
//!   write that ends the claim (complete, fail, retry, defer, release,
//!   cancel, or the sweep handing a lapsed claim back). Nothing else holds
//!   one, so there is no counter to drift: the count is the claimed items.
//! - A claim never admits an item that would put a limit over its
//!   concurrency, whatever the number of concurrent claimers: admission
//!   and the count it reads are serialised per scope (PostgreSQL: a
//!   transaction lock per scope key; SQLite: the single writer; memory:
//!   the store's lock).
//! - An item held back by a limit is not claimed and spends no attempt.
//! - An **ordered** per-group limit (concurrency 1) admits only the head of
//!   each group: the item no earlier item of the same tenant, kind and group
//!   precedes while that one is pending (retrying included), claimed, or
//!   dead-lettered under [`OnDeadLetter::Hold`] ([`blocks_order`]). "Earlier"
//!   is the store's enqueue order (PostgreSQL: the `items_seq` sequence;
//!   SQLite: the rowid; memory: an insert counter), so two enqueues that
//!   commit one after the other run in that order. Enqueues whose
//!   transactions overlap have no order between them until both commit; a
//!   claim orders the ones it sees by their sequence.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Result};

/// What a limit applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "scope", content = "name", rename_all = "snake_case")]
pub enum LimitScope {
    /// Every item of a lane.
    Lane(String),
    /// Every item of a kind, in any lane.
    Kind(String),
    /// The items of a kind in each group separately (a tenant's group
    /// `customer:42` is its own; items without a group are not limited).
    KindPerGroup(String),
}

impl LimitScope {
    /// The scope's kind of target as stored: `lane`, `kind` or `group`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            LimitScope::Lane(_) => "lane",
            LimitScope::Kind(_) => "kind",
            LimitScope::KindPerGroup(_) => "group",
        }
    }

    /// The lane or kind it names.
    pub fn name(&self) -> &str {
        match self {
            LimitScope::Lane(n) | LimitScope::Kind(n) | LimitScope::KindPerGroup(n) => n,
        }
    }

    /// The scope from its stored parts.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `scope` for another word.
    pub fn from_parts(scope: &str, name: &str) -> Result<LimitScope> {
        match scope {
            "lane" => Ok(LimitScope::Lane(name.to_owned())),
            "kind" => Ok(LimitScope::Kind(name.to_owned())),
            "group" => Ok(LimitScope::KindPerGroup(name.to_owned())),
            other => Err(Error::invalid(
                "scope",
                format!("unknown limit scope {other:?} (lane, kind or group)"),
            )),
        }
    }

    /// Checks the name it carries (a lane name or a kind name).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `lane` or `kind`.
    pub fn validate(&self) -> Result<()> {
        match self {
            LimitScope::Lane(l) => drover_core::item::validate_lane(l),
            LimitScope::Kind(k) | LimitScope::KindPerGroup(k) => {
                drover_core::item::validate_kind(k)
            }
        }
    }
}

impl std::fmt::Display for LimitScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitScope::Lane(l) => write!(f, "lane {l}"),
            LimitScope::Kind(k) => write!(f, "kind {k}"),
            LimitScope::KindPerGroup(k) => write!(f, "kind {k} per group"),
        }
    }
}

/// Who set a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// Declared in code (a worker's handlers, written at its start).
    Code,
    /// Set by an operator (`drover limits set`); wins over code until
    /// cleared.
    Operator,
}

impl LimitSource {
    /// `code` or `operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitSource::Code => "code",
            LimitSource::Operator => "operator",
        }
    }

    /// The source as stored.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `source` for another word.
    pub fn from_name(name: &str) -> Result<LimitSource> {
        match name {
            "code" => Ok(LimitSource::Code),
            "operator" => Ok(LimitSource::Operator),
            other => Err(Error::invalid(
                "source",
                format!("unknown limit source {other:?} in the database"),
            )),
        }
    }
}

/// The most a concurrency limit may be.
pub const MAX_CONCURRENCY: u32 = 100_000;

/// Checks a concurrency.
///
/// # Errors
/// [`Error::InvalidInput`] on `concurrency` outside 1 to [`MAX_CONCURRENCY`].
pub fn validate_concurrency(n: u32) -> Result<()> {
    if (1..=MAX_CONCURRENCY).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(
            "concurrency",
            format!("must be 1 to {MAX_CONCURRENCY}, got {n}"),
        ))
    }
}

/// What an ordered group does when one of its items is dead-lettered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadLetter {
    /// The next item of the group runs (the dead one is final).
    #[default]
    Continue,
    /// The group waits until an operator retries or cancels the dead item.
    Hold,
}

impl OnDeadLetter {
    /// `continue` or `hold`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDeadLetter::Continue => "continue",
            OnDeadLetter::Hold => "hold",
        }
    }

    /// The setting from its name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `on_dead_letter` for another word.
    pub fn from_name(name: &str) -> Result<OnDeadLetter> {
        match name {
            "continue" => Ok(OnDeadLetter::Continue),
            "hold" => Ok(OnDeadLetter::Hold),
            other => Err(Error::invalid(
                "on_dead_letter",
                format!("unknown setting {other:?} (continue or hold)"),
            )),
        }
    }
}

/// What a limit is set to: a concurrency, and for a per-group limit of 1
/// whether each group runs in enqueue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSpec {
    /// At most this many claimed at once.
    pub concurrency: u32,
    /// The group's items run one at a time in enqueue order (a per-group
    /// limit of 1 only).
    #[serde(default)]
    pub ordered: bool,
    /// What an ordered group does past a dead-lettered item.
    #[serde(default)]
    pub on_dead_letter: OnDeadLetter,
}

impl LimitSpec {
    /// A plain concurrency limit.
    pub fn concurrency(n: u32) -> LimitSpec {
        LimitSpec {
            concurrency: n,
            ordered: false,
            on_dead_letter: OnDeadLetter::Continue,
        }
    }

    /// An ordered group: one at a time, in enqueue order, `on_dead_letter`
    /// deciding what a dead-lettered item does to the rest.
    pub fn ordered(on_dead_letter: OnDeadLetter) -> LimitSpec {
        LimitSpec {
            concurrency: 1,
            ordered: true,
            on_dead_letter,
        }
    }

    /// Checks the spec for `scope`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `concurrency` out of range, or on
    /// `ordered` for a scope other than a kind per group or a concurrency
    /// other than 1.
    pub fn validate(&self, scope: &LimitScope) -> Result<()> {
        validate_concurrency(self.concurrency)?;
        if self.ordered {
            if !matches!(scope, LimitScope::KindPerGroup(_)) {
                return Err(Error::invalid(
                    "ordered",
                    format!("only a per-group limit orders its items, not {scope}"),
                ));
            }
            if self.concurrency != 1 {
                return Err(Error::invalid(
                    "ordered",
                    format!(
                        "an ordered group runs one item at a time: concurrency must be 1, got {}",
                        self.concurrency
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl From<u32> for LimitSpec {
    fn from(n: u32) -> LimitSpec {
        LimitSpec::concurrency(n)
    }
}

impl std::fmt::Display for LimitSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.concurrency)?;
        if self.ordered {
            write!(
                f,
                " ordered, on dead letter {}",
                self.on_dead_letter.as_str()
            )?;
        }
        Ok(())
    }
}

/// Whether an earlier item of an ordered group in `status` keeps the later
/// ones waiting: pending (retrying included) or claimed always, dead-
/// lettered when the group holds on a dead letter.
pub fn blocks_order(status: drover_core::item::Status, on_dead_letter: OnDeadLetter) -> bool {
    use drover_core::item::Status;
    match status {
        Status::Pending | Status::Claimed => true,
        Status::Failed => on_dead_letter == OnDeadLetter::Hold,
        Status::Done | Status::Cancelled => false,
    }
}

/// The kinds whose per-group limit in `limits` is ordered, with what each
/// does past a dead letter.
pub fn ordered_kinds(limits: &[LimitSetting]) -> Vec<(String, OnDeadLetter)> {
    limits
        .iter()
        .filter_map(|l| match &l.scope {
            LimitScope::KindPerGroup(k) if l.ordered => Some((k.clone(), l.on_dead_letter)),
            _ => None,
        })
        .collect()
}

/// One stored setting of a limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSetting {
    /// What it applies to.
    pub scope: LimitScope,
    /// Who set it.
    pub source: LimitSource,
    /// At most this many claimed at once.
    pub concurrency: u32,
    /// Each group runs in enqueue order (a per-group limit of 1).
    #[serde(default)]
    pub ordered: bool,
    /// What an ordered group does past a dead-lettered item.
    #[serde(default)]
    pub on_dead_letter: OnDeadLetter,
    /// When it was set (the store's clock).
    pub set_at: DateTime<Utc>,
    /// Who set it (nil for code).
    pub set_by: Uuid,
}

impl LimitSetting {
    /// What it is set to.
    pub fn spec(&self) -> LimitSpec {
        LimitSpec {
            concurrency: self.concurrency,
            ordered: self.ordered,
            on_dead_letter: self.on_dead_letter,
        }
    }
}

/// The earliest item of an ordered group that keeps an item waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderBlocker {
    /// The earlier item.
    pub id: Uuid,
    /// Its status (pending, claimed, or failed under a hold).
    pub status: drover_core::item::Status,
}

/// The limits in force: for each scope, the operator's setting if there
/// is one, else the code's. Sorted by scope.
pub fn effective(settings: &[LimitSetting]) -> Vec<LimitSetting> {
    let mut out: std::collections::BTreeMap<LimitScope, LimitSetting> = Default::default();
    for s in settings {
        match out.get(&s.scope) {
            Some(have) if have.source == LimitSource::Operator => {}
            _ => {
                out.insert(s.scope.clone(), s.clone());
            }
        }
    }
    out.into_values().collect()
}

/// A limit in force with what holds and waits on it, as
/// [`LimitStore::limit_usage`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitUsage {
    /// The setting in force.
    pub setting: LimitSetting,
    /// Items holding a slot now (claimed). For a per-group limit, the
    /// fullest group's count.
    pub in_use: u64,
    /// Pending items the limit applies to.
    pub waiting: u64,
}

/// Items of one scope-parts group as a usage read counts them: claimed
/// (holding slots) or pending and available (waiting), `n` of them.
#[derive(Debug, Clone)]
pub struct UsageRow {
    /// Claimed (else pending and available now).
    pub claimed: bool,
    /// Their lane.
    pub lane: String,
    /// Their kind.
    pub kind: String,
    /// Their tenant.
    pub tenant: Uuid,
    /// Their group.
    pub group: Option<String>,
    /// How many.
    pub n: u64,
}

/// The use of each limit in `limits` (the ones in force) from `rows`:
/// slots held (a per-group limit: its fullest group) and items waiting.
/// The one tally every backend's [`LimitStore::limit_usage`] answers with.
pub fn usage(limits: &[LimitSetting], rows: &[UsageRow]) -> Vec<LimitUsage> {
    limits
        .iter()
        .map(|l| {
            let one = std::slice::from_ref(l);
            let mut held: std::collections::HashMap<String, u64> = Default::default();
            let mut waiting = 0u64;
            for r in rows {
                let keys = keys_of(one, &r.lane, &r.kind, r.tenant, r.group.as_deref());
                if keys.is_empty() {
                    continue;
                }
                if r.claimed {
                    for (k, _) in keys {
                        *held.entry(k).or_default() += r.n;
                    }
                } else {
                    waiting += r.n;
                }
            }
            LimitUsage {
                setting: l.clone(),
                in_use: held.values().copied().max().unwrap_or(0),
                waiting,
            }
        })
        .collect()
}

/// Set by [`break_limits`].
#[cfg(feature = "test-util")]
static LIMITS_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Breaks (or mends) the limits of every claim this process makes:
/// [`Admission::admit`] says yes to every candidate. A deliberately broken
/// limit (feature `test-util` only), so the fault suite can show its
/// history checker catches one.
#[cfg(feature = "test-util")]
pub fn break_limits(broken: bool) {
    LIMITS_BROKEN.store(broken, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`break_limits`] broke this process's limits (always `false`
/// without feature `test-util`): a backend that admits in SQL passes its
/// limits as unbounded then, so the same break reaches its rule.
pub fn limits_broken() -> bool {
    #[cfg(feature = "test-util")]
    {
        LIMITS_BROKEN.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(feature = "test-util"))]
    {
        false
    }
}

/// The claim's rule: which candidates (in claim order) to admit, given the
/// limits that apply to each and how many slots each scope key holds now.
///
/// Pure so that the three backends admit alike; PostgreSQL's claim runs
/// the same rule in SQL under a lock per key (its contract cases keep it
/// equal to this one).
#[derive(Debug, Default)]
pub struct Admission {
    held: std::collections::HashMap<String, u64>,
}

impl Admission {
    /// Starts from the slots each key holds now.
    pub fn new(held: impl IntoIterator<Item = (String, u64)>) -> Admission {
        Admission {
            held: held.into_iter().collect(),
        }
    }

    /// Admits a candidate subject to `limits` (each a scope key and its
    /// concurrency) when every one has a free slot, taking one of each.
    pub fn admit(&mut self, limits: &[(String, u32)]) -> bool {
        #[cfg(feature = "test-util")]
        if LIMITS_BROKEN.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        let free = limits
            .iter()
            .all(|(key, n)| self.held.get(key).copied().unwrap_or(0) < u64::from(*n));
        if free {
            for (key, _) in limits {
                *self.held.entry(key.clone()).or_default() += 1;
            }
        }
        free
    }
}

/// The scope keys an item of `lane`, `kind`, `tenant` and `group` counts
/// against under `limits` (the ones in force), with each one's
/// concurrency. Keys are the same strings on every backend: `lane:<lane>`,
/// `kind:<kind>`, `group:<kind>:<tenant>:<group>`.
pub fn keys_of(
    limits: &[LimitSetting],
    lane: &str,
    kind: &str,
    tenant: Uuid,
    group: Option<&str>,
) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for l in limits {
        match &l.scope {
            LimitScope::Lane(n) if n == lane => out.push((format!("lane:{lane}"), l.concurrency)),
            LimitScope::Kind(n) if n == kind => out.push((format!("kind:{kind}"), l.concurrency)),
            LimitScope::KindPerGroup(n) if n == kind => {
                if let Some(g) = group {
                    out.push((format!("group:{kind}:{tenant}:{g}"), l.concurrency));
                }
            }
            _ => {}
        }
    }
    out
}

/// The claim's shortcut: when no per-group limit may apply to a claim of
/// `kinds` (empty: every kind) in `lane`, the fewest free slots among the
/// lane's limit and the limits of the kinds it may claim, given the slots
/// `held` per scope key (as [`keys_of`] spells them); `None` when a
/// per-group limit may apply (its keys depend on which items are claimed).
///
/// A claim that asks for no more than this needs no admission item by
/// item: whatever it takes fits every limit. PostgreSQL's `claim_limited`
/// takes the same shortcut in SQL.
pub fn room(
    limits: &[LimitSetting],
    lane: &str,
    kinds: &[String],
    held: &std::collections::HashMap<String, u64>,
) -> Option<u64> {
    let may = |k: &str| kinds.is_empty() || kinds.iter().any(|c| c == k);
    let mut room = u64::MAX;
    for l in limits {
        let key = match &l.scope {
            LimitScope::KindPerGroup(k) if may(k) => return None,
            LimitScope::Lane(n) if n == lane => format!("lane:{lane}"),
            LimitScope::Kind(k) if may(k) => format!("kind:{k}"),
            _ => continue,
        };
        let used = held.get(&key).copied().unwrap_or(0);
        room = room.min(u64::from(l.concurrency).saturating_sub(used));
    }
    Some(room)
}

/// The scopes whose limits are full, as a claim leaves them out of its
/// candidates: lanes, kinds, and (kind, tenant, group) per-group scopes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FullScopes {
    /// Lanes whose limit is full.
    pub lanes: Vec<String>,
    /// Kinds whose limit is full.
    pub kinds: Vec<String>,
    /// Groups (kind, tenant, group) whose per-group limit is full.
    pub groups: Vec<(String, Uuid, String)>,
}

/// Which scopes under `limits` the `claimed` items (lane, kind, tenant,
/// group) fill: the one rule both SQL backends leave full scopes out by.
pub fn full_scopes<'a>(
    limits: &[LimitSetting],
    claimed: impl IntoIterator<Item = (&'a str, &'a str, Uuid, Option<&'a str>)>,
) -> FullScopes {
    let mut lanes: HashMap<&str, u64> = HashMap::new();
    let mut kinds: HashMap<&str, u64> = HashMap::new();
    let mut groups: HashMap<(&str, Uuid, &str), u64> = HashMap::new();
    for (lane, kind, tenant, group) in claimed {
        *lanes.entry(lane).or_default() += 1;
        *kinds.entry(kind).or_default() += 1;
        if let Some(g) = group {
            *groups.entry((kind, tenant, g)).or_default() += 1;
        }
    }
    let mut f = FullScopes::default();
    for l in limits {
        let c = u64::from(l.concurrency);
        match &l.scope {
            LimitScope::Lane(n) if lanes.get(n.as_str()).is_some_and(|h| *h >= c) => {
                f.lanes.push(n.clone());
            }
            LimitScope::Kind(k) if kinds.get(k.as_str()).is_some_and(|h| *h >= c) => {
                f.kinds.push(k.clone());
            }
            LimitScope::KindPerGroup(k) => f.groups.extend(
                groups
                    .iter()
                    .filter(|((kind, _, _), n)| kind == k && **n >= c)
                    .map(|((kind, t, g), _)| ((*kind).to_owned(), *t, (*g).to_owned())),
            ),
            _ => {}
        }
    }
    f
}

/// Whether a claim of `lane` for `kinds` (empty: every kind) may meet a
/// limit in `limits`: a limit on the lane, or on a kind it may claim.
pub fn applies(limits: &[LimitSetting], lane: &str, kinds: &[String]) -> bool {
    limits.iter().any(|l| match &l.scope {
        LimitScope::Lane(n) => n == lane,
        LimitScope::Kind(k) | LimitScope::KindPerGroup(k) => {
            kinds.is_empty() || kinds.iter().any(|c| c == k)
        }
    })
}

/// How long a backend that reads its limits before a claim (PostgreSQL)
/// keeps them: a change reaches every claimer within this, well inside a
/// worker's poll interval.
pub const LIMITS_CACHE_TTL: std::time::Duration = std::time::Duration::from_millis(500);

/// The limits in force as a claimer last read them, for
/// [`LIMITS_CACHE_TTL`]: a claim of a lane no limit applies to then costs
/// no extra statement.
#[derive(Debug, Default)]
pub struct LimitCache {
    slot: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<Vec<LimitSetting>>)>>,
    /// The database lacks the one-call limited claim (a schema behind the
    /// binary): claim in steps until the limits are read again.
    steps_only: std::sync::atomic::AtomicBool,
    /// The database lacks the completion that hands its slots over
    /// (PostgreSQL migration 0045): complete, then claim, until the limits
    /// are read again.
    no_handover: std::sync::atomic::AtomicBool,
}

impl LimitCache {
    /// The cached limits, if read within the TTL.
    pub fn fresh(&self) -> Option<std::sync::Arc<Vec<LimitSetting>>> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < LIMITS_CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    /// Keeps `limits` (the ones in force) as read now.
    pub fn put(&self, limits: Vec<LimitSetting>) -> std::sync::Arc<Vec<LimitSetting>> {
        self.steps_only
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.no_handover
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let v = std::sync::Arc::new(limits);
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), v.clone()));
        v
    }

    /// Whether a claim found the database without the one-call limited
    /// claim since the limits were last read.
    pub fn steps_only(&self) -> bool {
        self.steps_only.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that the database lacks the one-call limited claim, until
    /// the limits are next read (then the call is tried again, so a
    /// migration under load is taken up within the cache's TTL).
    pub fn set_steps_only(&self) {
        self.steps_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a handover found the database without its function since
    /// the limits were last read.
    pub fn no_handover(&self) -> bool {
        self.no_handover.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that the database lacks the handover's function, until the
    /// limits are next read (as [`LimitCache::set_steps_only`]).
    pub fn set_no_handover(&self) {
        self.no_handover
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forgets the cached limits (this process changed them).
    pub fn clear(&self) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The concurrency-limit entity of the storage seam (system operations).
#[async_trait]
pub trait LimitStore: Send + Sync {
    /// Records `spec` for `scope` from `source` (insert or replace),
    /// stamping the store's clock and `actor`. The caller has validated
    /// `spec` for `scope` ([`LimitSpec::validate`]).
    async fn limit_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        spec: LimitSpec,
        actor: Uuid,
    ) -> Result<LimitSetting>;

    /// Removes `source`'s setting of `scope`; whether there was one.
    async fn limit_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool>;

    /// Every stored setting, both sources.
    async fn limit_settings(&self) -> Result<Vec<LimitSetting>>;

    /// The limits in force with their use: slots held and items waiting.
    async fn limit_usage(&self) -> Result<Vec<LimitUsage>>;

    /// Whether a limit in force applies to a claim of `lane` for `kinds`
    /// ([`applies`]), so a short claim there may have been held back by a
    /// full limit rather than by an empty lane. Read from the claimers'
    /// cache where the backend keeps one (a change shows within
    /// [`LIMITS_CACHE_TTL`]).
    async fn limits_apply(&self, lane: &str, kinds: &[String]) -> Result<bool>;

    /// The earliest item of `item`'s group (same tenant, kind and group)
    /// enqueued before it that keeps it waiting under an ordered limit
    /// with `on_dead_letter` ([`blocks_order`]); `None` when it is its
    /// group's head (or has no group).
    async fn order_blocker(
        &self,
        item: &drover_core::item::Item,
        on_dead_letter: OnDeadLetter,
    ) -> Result<Option<OrderBlocker>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(scope: LimitScope, source: LimitSource, n: u32) -> LimitSetting {
        LimitSetting {
            scope,
            source,
            concurrency: n,
            ordered: false,
            on_dead_letter: OnDeadLetter::Continue,
            set_at: DateTime::<Utc>::UNIX_EPOCH,
            set_by: Uuid::nil(),
        }
    }

    #[test]
    fn room_is_the_fewest_free_slots_unless_a_per_group_limit_may_apply() {
        let limits = vec![
            setting(LimitScope::Lane("l".into()), LimitSource::Code, 10),
            setting(LimitScope::Kind("a".into()), LimitSource::Code, 4),
            setting(LimitScope::KindPerGroup("g".into()), LimitSource::Code, 1),
            setting(LimitScope::Lane("other".into()), LimitSource::Code, 1),
        ];
        let held: std::collections::HashMap<String, u64> =
            [("lane:l".to_owned(), 3), ("kind:a".to_owned(), 1)].into();
        let kinds = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // The kind limit leaves 3, the lane's 7.
        assert_eq!(room(&limits, "l", &kinds(&["a"]), &held), Some(3));
        // A kind no limit names: only the lane's.
        assert_eq!(room(&limits, "l", &kinds(&["b"]), &held), Some(7));
        // Every kind, so the per-group kind too: no shortcut.
        assert_eq!(room(&limits, "l", &[], &held), None);
        assert_eq!(room(&limits, "l", &kinds(&["a", "g"]), &held), None);
        // Nothing applies: no bound.
        assert_eq!(room(&limits, "m", &kinds(&["b"]), &held), Some(u64::MAX));
        // Over a limit (it was lowered): none, not an underflow.
        let over: std::collections::HashMap<String, u64> = [("kind:a".to_owned(), 9)].into();
        assert_eq!(room(&limits, "l", &kinds(&["a"]), &over), Some(0));
    }

    #[test]
    fn the_operators_setting_wins_over_the_codes() {
        let k = || LimitScope::Kind("export".into());
        for order in [
            [
                setting(k(), LimitSource::Code, 4),
                setting(k(), LimitSource::Operator, 2),
            ],
            [
                setting(k(), LimitSource::Operator, 2),
                setting(k(), LimitSource::Code, 4),
            ],
        ] {
            let e = effective(&order);
            assert_eq!(e.len(), 1);
            assert_eq!((e[0].source, e[0].concurrency), (LimitSource::Operator, 2));
        }
        let only_code = effective(&[setting(k(), LimitSource::Code, 4)]);
        assert_eq!(only_code[0].concurrency, 4);
    }

    #[test]
    fn admission_takes_a_slot_of_every_limit_or_none() {
        let mut a = Admission::new([("kind:k".to_owned(), 1)]);
        let both = [("kind:k".to_owned(), 2), ("lane:l".to_owned(), 1)];
        assert!(a.admit(&both), "kind 1 of 2, lane 0 of 1");
        assert!(!a.admit(&both), "the lane is full");
        assert!(
            !a.admit(&[("kind:k".to_owned(), 2)]),
            "the kind is full now"
        );
        assert!(a.admit(&[]), "an item no limit applies to");
    }

    #[test]
    fn only_a_per_group_limit_of_one_is_ordered() {
        let group = LimitScope::KindPerGroup("sync".into());
        assert!(
            LimitSpec::ordered(OnDeadLetter::Hold)
                .validate(&group)
                .is_ok()
        );
        assert!(LimitSpec::concurrency(4).validate(&group).is_ok());
        let two = LimitSpec {
            concurrency: 2,
            ..LimitSpec::ordered(OnDeadLetter::Continue)
        };
        assert!(two.validate(&group).is_err(), "ordered needs 1");
        let kind = LimitScope::Kind("sync".into());
        assert!(
            LimitSpec::ordered(OnDeadLetter::Continue)
                .validate(&kind)
                .is_err()
        );
        assert!(LimitSpec::concurrency(0).validate(&kind).is_err());
        assert_eq!(
            OnDeadLetter::from_name("hold").expect("known"),
            OnDeadLetter::Hold
        );
        assert!(OnDeadLetter::from_name("skip").is_err());
    }

    #[test]
    fn an_earlier_item_blocks_until_final_or_dead_under_continue() {
        use drover_core::item::Status;
        for (status, cont, hold) in [
            (Status::Pending, true, true),
            (Status::Claimed, true, true),
            (Status::Failed, false, true),
            (Status::Done, false, false),
            (Status::Cancelled, false, false),
        ] {
            assert_eq!(
                blocks_order(status, OnDeadLetter::Continue),
                cont,
                "{status}"
            );
            assert_eq!(blocks_order(status, OnDeadLetter::Hold), hold, "{status}");
        }
        let mut ordered = setting(LimitScope::KindPerGroup("a".into()), LimitSource::Code, 1);
        ordered.ordered = true;
        ordered.on_dead_letter = OnDeadLetter::Hold;
        let plain = setting(LimitScope::KindPerGroup("b".into()), LimitSource::Code, 1);
        assert_eq!(
            ordered_kinds(&[ordered, plain]),
            vec![("a".to_owned(), OnDeadLetter::Hold)]
        );
    }

    #[test]
    fn keys_name_the_scopes_an_item_counts_against() {
        let t = Uuid::from_u128(7);
        let limits = [
            setting(LimitScope::Lane("l".into()), LimitSource::Code, 5),
            setting(LimitScope::Kind("k".into()), LimitSource::Code, 3),
            setting(LimitScope::KindPerGroup("k".into()), LimitSource::Code, 1),
            setting(LimitScope::Kind("other".into()), LimitSource::Code, 9),
        ];
        let keys = keys_of(&limits, "l", "k", t, Some("g"));
        assert_eq!(
            keys,
            vec![
                ("lane:l".to_owned(), 5),
                ("kind:k".to_owned(), 3),
                (format!("group:k:{t}:g"), 1)
            ]
        );
        assert_eq!(keys_of(&limits, "l", "k", t, None).len(), 2, "no group");
        assert!(keys_of(&limits, "m", "z", t, Some("g")).is_empty());
    }
}
