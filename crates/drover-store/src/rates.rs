//! The rate-limit entity of the storage seam: a generic cell rate (GCRA)
//! on the scopes of the concurrency limits ([`LimitScope`]: a lane, a
//! kind, each group of a kind), its record ([`RateSetting`]), the pure
//! rule every backend's claim admits by ([`Cells`]) and the [`RateStore`]
//! trait.
//!
//! A rate of `count` starts per `period` with a `burst` keeps, per scope
//! key (the same strings as the concurrency limits': `lane:<lane>`,
//! `kind:<kind>`, `group:<kind>:<tenant>:<group>`), one cell: its
//! theoretical arrival time `tat`. With the emission interval
//! `T = period / count` (rounded up to the microsecond) and the tolerance
//! `τ = (burst - 1) · T`, a start at `now` is admitted when
//! `max(tat, now) - now <= τ`, and moves the cell to `max(tat, now) + T`.
//! So in any window of length `W` at most `W / T + burst` starts are
//! admitted (`count · W / period + burst`), and an item held back becomes
//! claimable at `tat - τ`.
//!
//! Invariants every backend keeps (contract cases in `contract/rates.rs`):
//! - "Now" is the store's clock read inside the claim (PostgreSQL: the
//!   claim transaction's `now()`; SQLite and memory: the store's clock
//!   under the write lock), never a worker's.
//! - A cell is read and written in the same transaction as the claim it
//!   admits, serialised per key (PostgreSQL: the cell's row lock, taken in
//!   key order; SQLite: the single writer; memory: the store's lock), so
//!   concurrent claimers never admit past the bound between them.
//! - An item over its rate is not claimed and spends no attempt; a claim
//!   that no rate applies to reads no cell.
//! - A scope has at most two settings, one from code and one from an
//!   operator; the operator's wins until cleared ([`effective`]).
//! - A setting of [`Rate::CLOSED`] is a closure's (`closures.rs`): its
//!   cell (key ending [`CLOSED_SUFFIX`]) holds every start back until its
//!   `tat` and is never moved by a start.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::limits::{LimitScope, LimitSource};

mod cells;
pub use cells::{CELL_GRACE, Cells};
use drover_core::error::{Error, Result};

/// The most starts a rate may allow per period, and the largest burst.
pub const MAX_RATE_COUNT: u32 = 1_000_000;
/// The longest period of a rate (a week).
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a closure's cell key ends with (no scope name holds an `@`).
pub const CLOSED_SUFFIX: &str = "@closed";

impl Rate {
    /// The rate of a closure: admits a start only once the cell's time has
    /// come, and moves no cell.
    pub const CLOSED: Rate = Rate {
        count: 0,
        period_ms: 0,
        burst: 1,
    };

    /// Whether this is [`Rate::CLOSED`] (no setting can be: a count of 0
    /// is refused by [`Rate::validate`]).
    pub fn is_closure(&self) -> bool {
        self.count == 0
    }
}

/// A generic cell rate: at most `count` starts per `period`, with up to
/// `burst` at once from an idle cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rate {
    /// Starts allowed per period.
    pub count: u32,
    /// The period, in milliseconds.
    pub period_ms: u64,
    /// Starts an idle cell admits at once (at least 1).
    pub burst: u32,
}

impl Rate {
    /// `count` starts per `period`, one at a time (burst 1): the starts
    /// are spaced `period / count` apart.
    pub const fn per(count: u32, period: Duration) -> Rate {
        Rate {
            count,
            period_ms: period.as_millis() as u64,
            burst: 1,
        }
    }

    /// The same rate with up to `burst` starts at once from an idle cell.
    pub const fn with_burst(self, burst: u32) -> Rate {
        Rate { burst, ..self }
    }

    /// Parses `10/1s`, `500/1m`, `3/250ms`, `1/2h`, `100/1d` (a count, a
    /// slash, a whole number and a unit: `ms`, `s`, `m`, `h`, `d`; the
    /// number may be left out: `10/s`). Burst 1.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `rate` for another shape or a rate out
    /// of range ([`Rate::validate`]).
    pub fn parse(text: &str) -> Result<Rate> {
        let bad = || {
            Error::invalid(
                "rate",
                format!("expected COUNT/PERIOD such as 10/1s or 500/1m, got {text:?}"),
            )
        };
        let (count, period) = text.trim().split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let period = period.trim();
        let split = period.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (n, unit) = period.split_at(split);
        let n: u64 = if n.is_empty() {
            1
        } else {
            n.parse().map_err(|_| bad())?
        };
        let unit_ms: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        let rate = Rate {
            count,
            period_ms: n.checked_mul(unit_ms).ok_or_else(bad)?,
            burst: 1,
        };
        rate.validate()?;
        Ok(rate)
    }

    /// Checks the rate: count and burst 1 to [`MAX_RATE_COUNT`], period
    /// 1 ms to [`MAX_RATE_PERIOD`], and an interval between starts of at
    /// least a microsecond.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `rate` or `burst`.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_RATE_COUNT).contains(&self.count) {
            return Err(Error::invalid(
                "rate",
                format!(
                    "the count must be 1 to {MAX_RATE_COUNT}, got {}",
                    self.count
                ),
            ));
        }
        let max_ms = MAX_RATE_PERIOD.as_millis() as u64;
        if !(1..=max_ms).contains(&self.period_ms) {
            return Err(Error::invalid(
                "rate",
                format!(
                    "the period must be 1 ms to 7 days, got {} ms",
                    self.period_ms
                ),
            ));
        }
        if self.period_ms * 1_000 < u64::from(self.count) {
            return Err(Error::invalid(
                "rate",
                "more than one start per microsecond is not a rate limit",
            ));
        }
        if !(1..=MAX_RATE_COUNT).contains(&self.burst) {
            return Err(Error::invalid(
                "burst",
                format!("must be 1 to {MAX_RATE_COUNT}, got {}", self.burst),
            ));
        }
        Ok(())
    }

    /// The emission interval `T` in microseconds: the period over the
    /// count, rounded up (so the bound holds, never loosens).
    pub fn interval_us(&self) -> i64 {
        let period_us = i128::from(self.period_ms) * 1_000;
        let count = i128::from(self.count.max(1));
        i64::try_from((period_us + count - 1) / count).unwrap_or(i64::MAX)
    }

    /// The tolerance `τ = (burst - 1) · T` in microseconds.
    pub fn tolerance_us(&self) -> i64 {
        self.interval_us()
            .saturating_mul(i64::from(self.burst.saturating_sub(1)))
    }

    /// The cell after a start at `now` from `tat` (`None`: an idle cell),
    /// or `None` when the rate holds the start back.
    pub fn admit(&self, tat: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.is_closure() {
            return tat.is_none_or(|t| t <= now).then_some(now);
        }
        let base = tat.map_or(now, |t| t.max(now));
        let ahead = (base - now).num_microseconds().unwrap_or(i64::MAX);
        if ahead > self.tolerance_us() {
            return None;
        }
        Some(base + chrono::Duration::microseconds(self.interval_us()))
    }

    /// What a cell key of this rate ends with: `@count/period_ms/burst`
    /// (no scope name holds an `@`).
    pub fn cell_suffix(&self) -> String {
        if self.is_closure() {
            return CLOSED_SUFFIX.to_owned();
        }
        format!("@{}/{}/{}", self.count, self.period_ms, self.burst)
    }

    /// When a cell at `tat` next admits a start: `tat - τ` (in the past
    /// or now for a cell with room).
    pub fn next_start(&self, tat: DateTime<Utc>) -> DateTime<Utc> {
        tat - chrono::Duration::microseconds(self.tolerance_us())
    }

    /// Whether a cell at `tat` holds a start at `now` back.
    pub fn holds_back(&self, tat: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        self.next_start(tat) > now
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_closure() {
            return write!(f, "closed");
        }
        let p = self.period_ms;
        let period = if p.is_multiple_of(86_400_000) {
            format!("{}d", p / 86_400_000)
        } else if p.is_multiple_of(3_600_000) {
            format!("{}h", p / 3_600_000)
        } else if p.is_multiple_of(60_000) {
            format!("{}m", p / 60_000)
        } else if p.is_multiple_of(1_000) {
            format!("{}s", p / 1_000)
        } else {
            format!("{p}ms")
        };
        write!(f, "{}/{period}", self.count)?;
        if self.burst > 1 {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

/// One stored setting of a rate limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateSetting {
    /// What it applies to.
    pub scope: LimitScope,
    /// Who set it.
    pub source: LimitSource,
    /// The rate.
    pub rate: Rate,
    /// When it was set (the store's clock).
    pub set_at: DateTime<Utc>,
    /// Who set it (nil for code).
    pub set_by: Uuid,
}

/// The rate limits in force: for each scope, the operator's setting if
/// there is one, else the code's. Sorted by scope.
pub fn effective(settings: &[RateSetting]) -> Vec<RateSetting> {
    let mut out: BTreeMap<LimitScope, RateSetting> = BTreeMap::new();
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

/// Whether a claim of `lane` for `kinds` (empty: every kind) may meet a
/// rate in `rates`.
pub fn applies(rates: &[RateSetting], lane: &str, kinds: &[String]) -> bool {
    rates.iter().any(|r| match &r.scope {
        LimitScope::Lane(n) => n == lane,
        LimitScope::Kind(k) | LimitScope::KindPerGroup(k) => {
            kinds.is_empty() || kinds.iter().any(|c| c == k)
        }
    })
}

/// The cell keys an item of `lane`, `kind`, `tenant` and `group` starts
/// against under `rates` (the ones in force), each with its rate. Spelt as
/// [`keys_of`](crate::limits::keys_of) spells concurrency keys, followed
/// by the rate ([`Rate::cell_suffix`]): a change of the rate in force
/// starts from its own cell, never from a theoretical arrival time kept in
/// another rate's units, and a code's rate declared again at every
/// worker's start finds its cell as it left it.
pub fn rate_keys_of(
    rates: &[RateSetting],
    lane: &str,
    kind: &str,
    tenant: Uuid,
    group: Option<&str>,
) -> Vec<(String, Rate)> {
    let mut out = Vec::new();
    for r in rates {
        match &r.scope {
            LimitScope::Lane(n) if n == lane => {
                out.push((format!("lane:{lane}{}", r.rate.cell_suffix()), r.rate));
            }
            LimitScope::Kind(n) if n == kind => {
                out.push((format!("kind:{kind}{}", r.rate.cell_suffix()), r.rate));
            }
            LimitScope::KindPerGroup(n) if n == kind => {
                if let Some(g) = group {
                    out.push((
                        format!("group:{kind}:{tenant}:{g}{}", r.rate.cell_suffix()),
                        r.rate,
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The scopes whose cells hold every start back as a claim begins, as its
/// candidates leave them out (an optimisation: admission re-reads the
/// cells it needs under their locks).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HeldBack {
    /// The claim's lane is over its rate: nothing of it is claimed.
    pub lane: bool,
    /// Kinds over their rate.
    pub kinds: Vec<String>,
    /// Groups (kind, tenant, group) over their per-group rate.
    pub groups: Vec<(String, Uuid, String)>,
    /// The rate scopes (closures left out) holding something back, each
    /// with its kind (`None`: a lane's), for
    /// [`HeldBack::note_rate_limited`].
    pub limited: BTreeMap<String, Option<String>>,
}

impl HeldBack {
    /// Counts a claim of `kinds` (empty: every kind) held back by each
    /// rate scope in [`HeldBack::limited`] that may apply to it
    /// ([`note_rate_limited`]).
    pub fn note_rate_limited(&self, kinds: &[String]) {
        note_rate_limited(self.limited.iter().filter_map(|(label, kind)| {
            let mine = match kind {
                None => true,
                Some(k) => kinds.is_empty() || kinds.iter().any(|c| c == k),
            };
            mine.then_some(label.as_str())
        }));
    }
}

/// Claims held back per rate scope in this process, as
/// `drover_rate_limited_total{scope}` publishes them.
static RATE_LIMITED: std::sync::Mutex<BTreeMap<String, u64>> =
    std::sync::Mutex::new(BTreeMap::new());
/// Whether [`RATE_LIMITED`] moved since it was last taken.
static RATE_LIMITED_MOVED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Counts one claim held back by each rate scope in `scopes` (labels as
/// [`LimitScope`] displays them: `kind call per group`): a claim that left
/// the scope's items out because its cell had no start to give, or whose
/// admission refused a candidate on it. Each scope once per call.
pub fn note_rate_limited<'a>(scopes: impl IntoIterator<Item = &'a str>) {
    let mut seen = std::collections::BTreeSet::new();
    let mut map: Option<std::sync::MutexGuard<'_, BTreeMap<String, u64>>> = None;
    for s in scopes {
        if !seen.insert(s) {
            continue;
        }
        let m = map.get_or_insert_with(|| RATE_LIMITED.lock().unwrap_or_else(|p| p.into_inner()));
        *m.entry(s.to_owned()).or_default() += 1;
        RATE_LIMITED_MOVED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The claims held back per rate scope in this process since it started,
/// when they moved since the last call (`None`: nothing new; one atomic
/// load, so a claim path may ask every time).
pub fn rate_limited_totals() -> Option<Vec<(String, u64)>> {
    if !RATE_LIMITED_MOVED.swap(false, std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let m = RATE_LIMITED.lock().unwrap_or_else(|p| p.into_inner());
    Some(m.iter().map(|(k, v)| (k.clone(), *v)).collect())
}

/// The claims held back by the rate scope `scope` in this process so far
/// (what `drover_rate_limited_total{scope}` last published or will).
pub fn rate_limited_count(scope: &str) -> u64 {
    let m = RATE_LIMITED.lock().unwrap_or_else(|p| p.into_inner());
    m.get(scope).copied().unwrap_or(0)
}

/// The scope label (as [`LimitScope`] displays it) of a rate cell key;
/// `None` for a closure's cell.
fn scope_label(key: &str) -> Option<String> {
    let (body, suffix) = key.rsplit_once('@')?;
    if suffix == &CLOSED_SUFFIX[1..] {
        return None;
    }
    if let Some(l) = body.strip_prefix("lane:") {
        return Some(format!("lane {l}"));
    }
    if let Some(k) = body.strip_prefix("kind:") {
        return Some(format!("kind {k}"));
    }
    let rest = body.strip_prefix("group:")?;
    // The kind ends at the first `:` followed by a tenant's UUID and `:`.
    for (i, _) in rest.match_indices(':') {
        let after = &rest[i + 1..];
        if after.len() > 37
            && after.as_bytes()[36] == b':'
            && after.get(..36).is_some_and(|t| Uuid::parse_str(t).is_ok())
        {
            return Some(format!("kind {} per group", &rest[..i]));
        }
    }
    None
}

/// Which scopes of `rates` the `cells` (key, tat) hold back at `now`, for
/// a claim of `lane`.
pub fn held_back<'a>(
    rates: &[RateSetting],
    lane: &str,
    cells: impl IntoIterator<Item = (&'a str, DateTime<Utc>)>,
    now: DateTime<Utc>,
) -> HeldBack {
    let mut out = HeldBack::default();
    for (cell, tat) in cells {
        for r in rates {
            if !r.rate.holds_back(tat, now) {
                continue;
            }
            let Some(key) = cell.strip_suffix(&r.rate.cell_suffix()) else {
                continue;
            };
            let kind = match &r.scope {
                LimitScope::Lane(n) if n == lane && key == format!("lane:{n}") => {
                    out.lane = true;
                    None
                }
                LimitScope::Kind(k) if key == format!("kind:{k}") => {
                    out.kinds.push(k.clone());
                    Some(k)
                }
                LimitScope::KindPerGroup(k) => match parse_group_key(key, k) {
                    Some(g) => {
                        out.groups.push(g);
                        Some(k)
                    }
                    None => continue,
                },
                _ => continue,
            };
            if !r.rate.is_closure() {
                out.limited.insert(r.scope.to_string(), kind.cloned());
            }
        }
    }
    out
}

/// The (kind, tenant, group) of a per-group cell key of `kind`, if `key`
/// is one (the kind is known, so a `:` in it or in the group is no
/// ambiguity: the tenant is the 36 characters after it).
fn parse_group_key(key: &str, kind: &str) -> Option<(String, Uuid, String)> {
    let rest = key
        .strip_prefix("group:")?
        .strip_prefix(kind)?
        .strip_prefix(':')?;
    let tenant = Uuid::parse_str(rest.get(..36)?).ok()?;
    let group = rest.get(36..)?.strip_prefix(':')?;
    Some((kind.to_owned(), tenant, group.to_owned()))
}

/// A rate limit in force with when its next start is allowed, as
/// [`RateStore::rate_usage`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateUsage {
    /// The setting in force.
    pub setting: RateSetting,
    /// When the next start is allowed (the store's clock): `None` when one
    /// is allowed now. For a per-group rate, the latest among its groups
    /// held back now.
    pub next_start_at: Option<DateTime<Utc>>,
    /// For a per-group rate, how many groups it holds back now (else 0 or
    /// 1).
    pub held_back: u64,
}

/// The use of each rate in `rates` (the ones in force) from the `cells`
/// (key, tat) at `now`. The one tally every backend answers with.
pub fn usage<'a>(
    rates: &[RateSetting],
    cells: impl IntoIterator<Item = (&'a str, DateTime<Utc>)> + Clone,
    now: DateTime<Utc>,
) -> Vec<RateUsage> {
    rates
        .iter()
        .map(|r| {
            let mut next: Option<DateTime<Utc>> = None;
            let mut held = 0u64;
            for (cell, tat) in cells.clone() {
                let Some(key) = cell.strip_suffix(&r.rate.cell_suffix()) else {
                    continue;
                };
                let mine = match &r.scope {
                    LimitScope::Lane(n) => key == format!("lane:{n}"),
                    LimitScope::Kind(k) => key == format!("kind:{k}"),
                    LimitScope::KindPerGroup(k) => parse_group_key(key, k).is_some(),
                };
                if mine && r.rate.holds_back(tat, now) {
                    held += 1;
                    let at = r.rate.next_start(tat);
                    next = Some(next.map_or(at, |n| n.max(at)));
                }
            }
            RateUsage {
                setting: r.clone(),
                next_start_at: next,
                held_back: held,
            }
        })
        .collect()
}

/// How long from `now` until a rate in `rates` that a claim of `lane` for
/// `kinds` (empty: every kind) may meet next allows a start, among the
/// `cells` (key, tat) that hold one back now: the instant a claimer that
/// came back short should claim again. `None` when no such cell holds a
/// start back.
pub fn wait_for<'a>(
    rates: &[RateSetting],
    lane: &str,
    kinds: &[String],
    cells: impl IntoIterator<Item = (&'a str, DateTime<Utc>)>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let may = |k: &str| kinds.is_empty() || kinds.iter().any(|c| c == k);
    let mine: Vec<&RateSetting> = rates
        .iter()
        .filter(|r| match &r.scope {
            LimitScope::Lane(n) => n == lane,
            LimitScope::Kind(k) | LimitScope::KindPerGroup(k) => may(k),
        })
        .collect();
    if mine.is_empty() {
        return None;
    }
    let mut soonest: Option<DateTime<Utc>> = None;
    for (cell, tat) in cells {
        for r in &mine {
            let Some(key) = cell.strip_suffix(&r.rate.cell_suffix()) else {
                continue;
            };
            let of_scope = match &r.scope {
                LimitScope::Lane(n) => key == format!("lane:{n}"),
                LimitScope::Kind(k) => key == format!("kind:{k}"),
                LimitScope::KindPerGroup(k) => parse_group_key(key, k).is_some(),
            };
            if of_scope && r.rate.holds_back(tat, now) {
                let at = r.rate.next_start(tat);
                soonest = Some(soonest.map_or(at, |s| s.min(at)));
            }
        }
    }
    soonest.and_then(|at| (at - now).to_std().ok())
}

/// How long a backend keeps the rates in force it read (as
/// [`LIMITS_CACHE_TTL`](crate::limits::LIMITS_CACHE_TTL)).
pub const RATES_CACHE_TTL: Duration = crate::limits::LIMITS_CACHE_TTL;

/// The rates in force as a claimer last read them, with the flow
/// settings' generation read before them (migration 0046).
#[derive(Debug, Clone, Default)]
pub struct InForce {
    /// The rates in force, closures included ([`crate::closures::with_closures`]).
    pub rates: std::sync::Arc<Vec<RateSetting>>,
    /// The generation read before the rates; `None` on a schema before
    /// migration 0046, whose claims check none.
    pub flow_gen: Option<i64>,
}

/// The rates in force as a claimer last read them, for
/// [`RATES_CACHE_TTL`]: a claim no rate applies to costs no statement
/// beyond the read of the generation its claim makes in the same
/// statement. A claim that finds the generation moved (another process
/// changed a rate or a closure) claims nothing and clears this cache
/// ([`RateCache::clear`]), so no claim runs on settings older than the
/// last change committed before it began. A read that began before this
/// process changed the rates (or closed a scope) is not kept.
#[derive(Debug, Default)]
pub struct RateCache {
    slot: std::sync::Mutex<Option<(std::time::Instant, InForce)>>,
    generation: std::sync::atomic::AtomicU64,
}

impl RateCache {
    /// The cached rates, if read within the TTL.
    pub fn fresh(&self) -> Option<InForce> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < RATES_CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    /// The generation to hand [`RateCache::put`], taken before reading.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Keeps `rates` (the ones in force) as read since `generation`, with
    /// the database's `flow_gen` read before them, unless
    /// [`RateCache::clear`] ran meanwhile.
    pub fn put(&self, generation: u64, rates: Vec<RateSetting>, flow_gen: Option<i64>) -> InForce {
        let v = InForce {
            rates: std::sync::Arc::new(rates),
            flow_gen,
        };
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation() == generation {
            *slot = Some((std::time::Instant::now(), v.clone()));
        }
        v
    }

    /// Forgets the cached rates (this process changed them, or a claim
    /// found the database's generation moved).
    pub fn clear(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        *slot = None;
    }
}

/// How many times a claim reads the settings again after finding the
/// generation moved before it answers with nothing (a storm of closes
/// moving it faster than a claimer re-reads; its next claim tries again).
pub const STALE_RETRIES: usize = 3;

/// The rate-limit entity of the storage seam (system operations).
#[async_trait]
pub trait RateStore: Send + Sync {
    /// Records `rate` for `scope` from `source` (insert or replace),
    /// stamping the store's clock and `actor`. The caller has validated
    /// `rate` ([`Rate::validate`]).
    async fn rate_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        rate: Rate,
        actor: Uuid,
    ) -> Result<RateSetting>;

    /// Removes `source`'s rate of `scope`; whether there was one.
    async fn rate_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool>;

    /// Every stored rate setting, both sources.
    async fn rate_settings(&self) -> Result<Vec<RateSetting>>;

    /// The rates in force with when each next allows a start.
    async fn rate_usage(&self) -> Result<Vec<RateUsage>>;

    /// How long until a rate that may apply to a claim of `lane` for
    /// `kinds` next allows a start it holds back now ([`wait_for`], on the
    /// store's clock); `None` when none holds one back. Asked after a short
    /// claim, from the claimers' cache of the rates in force: a claim no
    /// rate applies to costs no statement.
    async fn rate_wait(&self, lane: &str, kinds: &[String]) -> Result<Option<Duration>>;

    /// Deletes up to `batch` cells behind the store's clock by more than
    /// [`CELL_GRACE`] (an idle cell is the same as none), so a scope used
    /// once leaves nothing once its cell goes idle; how many. A cell a
    /// claim moves ahead meanwhile is kept (the clock is compared on the
    /// row the delete removes).
    async fn rate_cells_purge(&self, batch: u32) -> Result<u64>;

    /// The cells of `keys` ahead of the store's clock (key, tat), with that
    /// clock: what holds a start of one item back now and until when
    /// ("why is it waiting"). A key not returned is idle.
    async fn rate_cells(
        &self,
        keys: &[String],
    ) -> Result<(DateTime<Utc>, Vec<(String, DateTime<Utc>)>)>;
}

/// How many idle cells one sweep pass deletes at most.
pub const RATE_CELLS_PURGE_BATCH: u32 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::microseconds(us)
    }

    #[test]
    fn parse_reads_count_and_period() {
        let r = Rate::parse("10/1s").expect("valid");
        assert_eq!((r.count, r.period_ms, r.burst), (10, 1_000, 1));
        assert_eq!(Rate::parse("500/1m").expect("valid").period_ms, 60_000);
        assert_eq!(Rate::parse("3/250ms").expect("valid").period_ms, 250);
        assert_eq!(Rate::parse("10/s").expect("valid").period_ms, 1_000);
        for bad in [
            "10",
            "0/1s",
            "10/0s",
            "10/1w",
            "x/1s",
            "10/8d",
            "2000000/1ms",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Rate::parse("500/1m").expect("valid").to_string(), "500/1m");
        assert_eq!(
            Rate::per(10, Duration::from_secs(1))
                .with_burst(20)
                .to_string(),
            "10/1s burst 20"
        );
    }

    #[test]
    fn a_burst_is_admitted_then_the_rate_holds() {
        let r = Rate::per(10, Duration::from_secs(1)).with_burst(3);
        assert_eq!(r.interval_us(), 100_000);
        let mut c = Cells::new(at(0), []);
        let k = [("kind:k".to_owned(), r)];
        assert!(c.admit(&k) && c.admit(&k) && c.admit(&k), "the burst");
        assert!(!c.admit(&k), "the fourth waits");
        // The cell stands at 300 ms: the next start at 300 - 200 = 100 ms.
        let tat = c.changed()["kind:k"];
        assert_eq!(tat, at(300_000));
        assert_eq!(r.next_start(tat), at(100_000));
        let mut later = Cells::new(at(99_999), [("kind:k".to_owned(), tat)]);
        assert!(!later.admit(&k));
        let mut then = Cells::new(at(100_000), [("kind:k".to_owned(), tat)]);
        assert!(then.admit(&k), "admitted at its instant");
        assert!(!then.admit(&k));
    }

    #[test]
    fn a_start_takes_every_cell_or_none() {
        let slow = Rate::per(1, Duration::from_secs(60));
        let fast = Rate::per(100, Duration::from_secs(1)).with_burst(2);
        let mut c = Cells::new(at(0), []);
        let both = [("lane:l".to_owned(), fast), ("kind:k".to_owned(), slow)];
        assert!(c.admit(&both));
        assert!(!c.admit(&both), "the kind's cell is full");
        assert_eq!(c.changed()["lane:l"], at(10_000), "the lane moved once");
        assert!(
            c.admit(&[("lane:l".to_owned(), fast)]),
            "the lane's burst has a second start"
        );
        assert!(!c.admit(&[("lane:l".to_owned(), fast)]));
    }

    #[test]
    fn starts_in_any_window_stay_under_the_bound() {
        // Starts attempted every 7 ms for 10 s against 10/1s burst 5.
        let r = Rate::per(10, Duration::from_secs(1)).with_burst(5);
        let key = [("k".to_owned(), r)];
        let mut tat = None;
        let mut starts = Vec::new();
        for i in 0..1_430i64 {
            let now = at(i * 7_000);
            let mut c = Cells::new(now, tat.map(|t| ("k".to_owned(), t)));
            if c.admit(&key) {
                starts.push(now);
                tat = Some(c.changed()["k"]);
            }
        }
        for (i, s) in starts.iter().enumerate() {
            for w_ms in [1i64, 100, 1_000, 3_000] {
                let end = *s + chrono::Duration::milliseconds(w_ms);
                let n = starts[i..].iter().take_while(|t| **t < end).count() as i64;
                assert!(n <= 10 * w_ms / 1_000 + 5, "{n} starts in {w_ms} ms");
            }
        }
        assert!(starts.len() >= 100, "the rate is used: {}", starts.len());
    }

    #[test]
    fn held_back_and_usage_read_the_cells() {
        let t = Uuid::from_u128(9);
        let rate = Rate::per(1, Duration::from_secs(10));
        let set = |scope| RateSetting {
            scope,
            source: LimitSource::Code,
            rate,
            set_at: at(0),
            set_by: Uuid::nil(),
        };
        let rates = [
            set(LimitScope::Lane("l".into())),
            set(LimitScope::Kind("a:b".into())),
            set(LimitScope::KindPerGroup("a".into())),
        ];
        let now = at(1_000_000);
        let sfx = rate.cell_suffix();
        let g = format!("group:a:{t}:c:d{sfx}");
        let l = format!("lane:l{sfx}");
        let k = format!("kind:a:b{sfx}");
        let cells = [
            (l.as_str(), at(500_000)),
            (k.as_str(), at(5_000_000)),
            (g.as_str(), at(3_000_000)),
            ("kind:a:b@9/9/9", at(9_000_000)),
        ];
        let h = held_back(&rates, "l", cells, now);
        assert!(!h.lane, "the lane's cell is behind the clock");
        assert_eq!(h.kinds, vec!["a:b".to_owned()]);
        assert_eq!(h.groups, vec![("a".to_owned(), t, "c:d".to_owned())]);
        let u = usage(&rates, cells, now);
        assert_eq!(u[0].next_start_at, None);
        assert_eq!(u[1].next_start_at, Some(at(5_000_000)));
        assert_eq!(
            (u[2].held_back, u[2].next_start_at),
            (1, Some(at(3_000_000)))
        );
    }

    #[test]
    fn a_short_claim_waits_for_the_soonest_cell_of_its_scopes() {
        let t = Uuid::from_u128(3);
        let rate = Rate::per(1, Duration::from_secs(10));
        let set = |scope| RateSetting {
            scope,
            source: LimitSource::Code,
            rate,
            set_at: at(0),
            set_by: Uuid::nil(),
        };
        let rates = [
            set(LimitScope::KindPerGroup("a".into())),
            set(LimitScope::Kind("b".into())),
        ];
        let sfx = rate.cell_suffix();
        let g = format!("group:a:{t}:g{sfx}");
        let k = format!("kind:b{sfx}");
        let cells = [(g.as_str(), at(4_000_000)), (k.as_str(), at(2_000_000))];
        let now = at(1_000_000);
        let kinds = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            wait_for(&rates, "l", &kinds(&["a"]), cells, now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            wait_for(&rates, "l", &[], cells, now),
            Some(Duration::from_secs(1))
        );
        assert_eq!(wait_for(&rates, "l", &kinds(&["c"]), cells, now), None);
        assert_eq!(wait_for(&rates, "l", &[], cells, at(9_000_000)), None);
    }

    #[test]
    fn keys_and_the_operators_rate_win() {
        let t = Uuid::from_u128(7);
        let r = Rate::per(5, Duration::from_secs(1));
        let mk = |scope, source| RateSetting {
            scope,
            source,
            rate: r,
            set_at: at(0),
            set_by: Uuid::nil(),
        };
        let rates = [
            mk(LimitScope::Lane("l".into()), LimitSource::Code),
            mk(LimitScope::KindPerGroup("k".into()), LimitSource::Code),
        ];
        let keys = rate_keys_of(&rates, "l", "k", t, Some("g"));
        assert_eq!(
            keys,
            vec![
                ("lane:l@5/1000/1".to_owned(), r),
                (format!("group:k:{t}:g@5/1000/1"), r)
            ]
        );
        assert!(applies(&rates, "m", &["k".to_owned()]));
        assert!(!applies(&rates, "m", &["z".to_owned()]));
        let mut op = mk(LimitScope::Lane("l".into()), LimitSource::Operator);
        op.rate = Rate::per(1, Duration::from_secs(1));
        let e = effective(&[op.clone(), rates[0].clone()]);
        assert_eq!(e, vec![op]);
    }
}
