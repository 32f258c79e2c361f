//! Parking the deep backlog of a full group: the rules every backend
//! shares, and the seam the sweep calls ([`ParkStore`]).
//!
//! A claim walks its lane's pending items in claim order and reads past
//! the items of groups whose per-group limit is full. One full group with a
//! backlog of a million items ahead of the others in claim order made every
//! other group's claim read past all of them (hundreds of milliseconds per
//! claim). Parking takes such a backlog out of the claim's way and gives it
//! back in order as the group drains:
//!
//! - **Which groups.** A group of a kind under a per-group limit, whose
//!   slots are all held, with more than [`deep`] due pending items
//!   that are not parked. Only the sweep parks ([`ParkStore::park_pass`]),
//!   so an installation without such a backlog never writes a parked row.
//! - **What is parked.** The group's due pending items beyond its first
//!   [`window`] in the group's own order (claim order, or enqueue order for
//!   an ordered group): their `available_at` moves [`PARK_OFFSET`] ahead,
//!   past every claim's `available_at <= now` bound, so the claim indexes
//!   never reach them. The offset is a fixed number of seconds, so the move
//!   back is exact and the parked items keep their order among themselves.
//!   Readers show the original time ([`shown`]).
//! - **Giving back.** Each item a claim takes from a parked group gives
//!   back one parked item, the first in the group's order (so the window
//!   stays full as the group drains); each sweep pass tops a parked group's
//!   window up again (a giving back lost to a crash between the claim and
//!   its statement waits at most one pass), parks what arrived beyond twice
//!   the window since, and gives back every parked item of a kind no
//!   per-group limit applies to any more.
//! - **Invariants.** Only pending items are parked and only by this seam;
//!   a parked item is never claimable (its `available_at` is centuries
//!   ahead); a group's parked items come after its window in the group's
//!   order, and are given back earliest first; an ordered group's window is
//!   its lowest enqueue positions, so its head is parked only when the
//!   window ran dry between passes (the next pass gives it back). Parking
//!   changes no status, spends no attempt and fires no trigger (they watch
//!   `status`).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use drover_core::error::Result;

/// A group is parked once more than this many of its due pending items
/// wait unparked while its slots are full.
pub const PARK_DEEP: u32 = 1024;

/// The fewest items a parked group keeps claimable (its window).
pub const PARK_WINDOW_MIN: u32 = 32;

/// Items parked or given back per statement.
pub const PARK_CHUNK: u32 = 5_000;

/// How long one sweep pass may spend parking before it leaves the rest to
/// the next pass (well inside the sweep's step timeout).
pub const PARK_PASS_BUDGET: Duration = Duration::from_secs(4);

/// How far a parked item's `available_at` moves: 1,000 Julian-Gregorian
/// years as a fixed number of seconds (exactly reversible).
pub const PARK_OFFSET_SECS: i64 = 31_556_952_000;

/// [`PARK_OFFSET_SECS`] as a duration.
pub const PARK_OFFSET: chrono::TimeDelta = chrono::TimeDelta::seconds(PARK_OFFSET_SECS);

/// How long a claimer keeps the list of parked groups before reading it
/// again (as the limits: a new parking is seen within it).
pub const PARKED_CACHE_TTL: Duration = crate::limits::LIMITS_CACHE_TTL;

/// An `available_at` at or after this (and before [`PARKED_BEFORE`]) is
/// a parked item's.
pub fn parked_from() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2200, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The end of the parked range: the far-future value a dependant holds
/// until its dependencies are done (9999-12-31) is not a parked item's.
pub fn parked_before() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9000, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Items due before this are never parked: moved by the offset they would
/// land below [`parked_from`] and read as unparked. (1,000 Julian-Gregorian
/// years from 1200-01-01 end half a day before 2200-01-01, so the floor is
/// a day later.)
pub fn park_floor() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(1200, 1, 2, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// [`parked_from`] and [`parked_before`] in seconds since the epoch: every
/// row a reader maps is tested, so the test is two integer comparisons
/// (a unit test holds them to the dates).
const PARKED_FROM_SECS: i64 = 7_258_118_400;
const PARKED_BEFORE_SECS: i64 = 221_845_392_000;

/// Whether `available_at` is a parked item's.
pub fn is_parked(available_at: DateTime<Utc>) -> bool {
    let s = available_at.timestamp();
    (PARKED_FROM_SECS..PARKED_BEFORE_SECS).contains(&s)
}

/// The `available_at` a reader shows: a parked item's original one.
pub fn shown(available_at: DateTime<Utc>) -> DateTime<Utc> {
    if is_parked(available_at) {
        available_at - PARK_OFFSET
    } else {
        available_at
    }
}

/// The items a parked group keeps claimable under a per-group limit of
/// `limit`: four rounds of its slots, at least [`PARK_WINDOW_MIN`].
pub fn window(limit: u32) -> u32 {
    limit.saturating_mul(4).max(PARK_WINDOW_MIN)
}

/// A group under a per-group limit of `limit` is parked once more than
/// this many of its due pending items wait unparked: [`PARK_DEEP`], or
/// twice its [`window`] when that is more.
pub fn deep(limit: u32) -> u32 {
    window(limit).saturating_mul(2).max(PARK_DEEP)
}

/// Per kind under a per-group limit: its limit and whether it is ordered.
pub type PerGroup = std::collections::HashMap<String, (u32, bool)>;

/// The kinds a per-group limit of `limits` (the ones in force) applies
/// to: what a pass parks and what a claim may give back for.
pub fn per_group(limits: &[crate::limits::LimitSetting]) -> PerGroup {
    limits
        .iter()
        .filter_map(|l| match &l.scope {
            crate::limits::LimitScope::KindPerGroup(k) => {
                Some((k.clone(), (l.concurrency, l.ordered)))
            }
            _ => None,
        })
        .collect()
}

/// One group a per-group limit applies to: tenant, kind, group.
pub type GroupKey = (Uuid, String, String);

/// What one pass of [`ParkStore::park_pass`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParkPass {
    /// Items parked.
    pub parked: u64,
    /// Items given back.
    pub unparked: u64,
    /// Groups with parked items after the pass.
    pub groups: u64,
}

impl ParkPass {
    /// Items moved either way: the sweep's count for the step.
    pub fn moved(&self) -> u64 {
        self.parked + self.unparked
    }
}

/// The groups with parked items as a claimer last read them, for
/// [`PARKED_CACHE_TTL`]: a claim whose items are of none of them gives
/// nothing back and reads nothing more.
#[derive(Debug, Default)]
pub struct ParkedCache {
    slot: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<Vec<GroupKey>>)>>,
}

impl ParkedCache {
    /// The cached groups, if read within the TTL.
    pub fn fresh(&self) -> Option<std::sync::Arc<Vec<GroupKey>>> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < PARKED_CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    /// Keeps `groups` as read now (sorted, for [`ParkedCache::of`]).
    pub fn put(&self, mut groups: Vec<GroupKey>) -> std::sync::Arc<Vec<GroupKey>> {
        groups.sort();
        let v = std::sync::Arc::new(groups);
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), v.clone()));
        v
    }

    /// Forgets the cached groups (this process parked some).
    pub fn clear(&self) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// For each group of `parked` that `claimed` (each item's tenant, kind
/// and group) took items of, how many: what the claim gives back.
pub fn give_back<'a>(
    parked: &[GroupKey],
    claimed: impl Iterator<Item = (Uuid, &'a str, Option<&'a str>)>,
) -> Vec<(GroupKey, u32)> {
    let mut out: Vec<(GroupKey, u32)> = Vec::new();
    for (tenant, kind, group) in claimed {
        let Some(group) = group else { continue };
        let key = (tenant, kind.to_owned(), group.to_owned());
        if parked.binary_search(&key).is_err() {
            continue;
        }
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => out.push((key, 1)),
        }
    }
    out
}

/// Parking deep backlogs (system operations). A supertrait of
/// [`Store`](super::Store).
#[async_trait]
pub trait ParkStore: Send + Sync {
    /// One pass of parking, run by the sweep: parks the backlog beyond the
    /// [`window`] of every full group deeper than [`PARK_DEEP`], tops up
    /// the window of every parked group, and gives back every parked item
    /// of a kind no per-group limit applies to any more; stops after
    /// [`PARK_PASS_BUDGET`] (the next pass goes on). Idempotent. A backend
    /// whose claim does not walk an index (memory) parks nothing.
    async fn park_pass(&self) -> Result<ParkPass>;

    /// The number of parked items (all tenants): for tests and operators.
    async fn parked_count(&self) -> Result<u64>;
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// The steps a backend gives the shared pass ([`run_pass`]) and give-back
/// ([`give_back_after`]): reads and single moves, each its own short
/// transaction. The algorithm lives here once, so the backends differ
/// only in their statements.
#[async_trait]
pub(crate) trait ParkSteps: crate::limits::LimitStore {
    /// The limits in force for a pass: read now, so a limit cleared a
    /// moment ago gives its groups back in this pass.
    async fn limits_for_pass(&self) -> Result<Vec<crate::limits::LimitSetting>> {
        Ok(crate::limits::effective(&self.limit_settings().await?))
    }
    /// The limits in force for a claim's give-back (the claimers' cache).
    async fn limits_for_claim(&self) -> Result<std::sync::Arc<Vec<crate::limits::LimitSetting>>>;
    /// The process's cache of parked groups.
    fn parked_cache(&self) -> &ParkedCache;
    /// The groups with parked items, read now.
    async fn parked_groups_now(&self) -> Result<Vec<GroupKey>>;
    /// The groups of the kinds `per` holding slots, with how many each.
    async fn held_groups(&self, per: &PerGroup) -> Result<Vec<(GroupKey, i64)>>;
    /// How many of the first `n` pending items of `key` in its order (enqueue
    /// order when `ordered`, else claim order) are due.
    async fn front_due(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u32>;
    /// Parks up to `n` due pending items of `key` beyond its first `keep`.
    async fn park(&self, key: &GroupKey, ordered: bool, keep: u32, n: u32) -> Result<u64>;
    /// Gives back up to `n` parked items of `key`, first in its order.
    async fn unpark(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u64>;
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// Parks `key` beyond `keep` in chunks until a short chunk or `over`.
async fn park_all<S: ParkSteps + ?Sized>(
    s: &S,
    key: &GroupKey,
    ordered: bool,
    keep: u32,
    over: &impl Fn() -> bool,
) -> Result<u64> {
    let mut total = 0;
    loop {
        let moved = s.park(key, ordered, keep, PARK_CHUNK).await?;
        total += moved;
        if moved < u64::from(PARK_CHUNK) || over() {
            return Ok(total);
        }
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// One parking pass ([`ParkStore::park_pass`]) over a backend's steps.
pub(crate) async fn run_pass<S: ParkSteps + ?Sized>(s: &S) -> Result<ParkPass> {
    let started = std::time::Instant::now();
    let over = || started.elapsed() >= PARK_PASS_BUDGET;
    let per = per_group(&s.limits_for_pass().await?);
    let mut pass = ParkPass::default();
    // Parked groups first: give back what no limit holds any more, top up
    // the windows of the others, park what arrived beyond them.
    for key in s.parked_groups_now().await? {
        if over() {
            break;
        }
        let Some(&(limit, ordered)) = per.get(&key.1) else {
            loop {
                let n = s.unpark(&key, false, PARK_CHUNK).await?;
                pass.unparked += n;
                if n < u64::from(PARK_CHUNK) || over() {
                    break;
                }
            }
            continue;
        };
        let w = window(limit);
        let due = s.front_due(&key, ordered, w).await?;
        if due < w {
            pass.unparked += s.unpark(&key, ordered, w - due).await?;
        } else if s.front_due(&key, false, 2 * w + 1).await? > 2 * w {
            // Items that arrived after the group was parked wait unparked
            // beyond its window (for an ordered group, each one a candidate
            // every claim reads past): park them too, keeping the parked
            // ones the group's last.
            pass.parked += park_all(s, &key, ordered, w, &over).await?;
        }
    }
    // Then the full groups that are deep: park beyond their window.
    if !per.is_empty() && !over() {
        for (key, held) in s.held_groups(&per).await? {
            if over() {
                break;
            }
            let Some(&(limit, ordered)) = per.get(&key.1) else {
                continue;
            };
            // Deep by its due items that are not parked, in claim order
            // whatever the group's order: an ordered group's parked items
            // come first by seq, and counting them hid its later arrivals.
            let d = deep(limit);
            if held < i64::from(limit) || s.front_due(&key, false, d + 1).await? <= d {
                continue;
            }
            pass.parked += park_all(s, &key, ordered, window(limit), &over).await?;
        }
    }
    let groups = s.parked_groups_now().await?;
    pass.groups = groups.len() as u64;
    s.parked_cache().put(groups);
    if pass.moved() > 0 {
        tracing::debug!(target: "drover::parking", parked = pass.parked,
            unparked = pass.unparked, groups = pass.groups, "parking pass");
    }
    Ok(pass)
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// After a claim: for each item of a parked group it took, gives back one
/// parked item of that group, so the group's window stays full. Never
/// fails the claim: what a failure leaves undone the next pass tops up.
pub(crate) async fn give_back_after<S: ParkSteps + ?Sized>(
    s: &S,
    items: &[drover_core::item::Item],
) {
    if let Err(e) = give_back_for(s, items).await {
        tracing::warn!(target: "drover::parking", error = %e,
            "giving back parked items after a claim failed; the sweep tops the window up");
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
async fn give_back_for<S: ParkSteps + ?Sized>(
    s: &S,
    items: &[drover_core::item::Item],
) -> Result<()> {
    // The common claims (no group, no per-group limit, nothing parked)
    // stop at a cache read and write nothing.
    if !items.iter().any(|i| i.group.is_some()) {
        return Ok(());
    }
    let per = per_group(&s.limits_for_claim().await?);
    if per.is_empty() {
        return Ok(());
    }
    let parked = match s.parked_cache().fresh() {
        Some(v) => v,
        None => s.parked_cache().put(s.parked_groups_now().await?),
    };
    if parked.is_empty() {
        return Ok(());
    }
    let back = give_back(
        &parked,
        items
            .iter()
            .map(|i| (i.tenant_id, i.kind.as_str(), i.group.as_deref())),
    );
    for (key, n) in back {
        let ordered = per.get(&key.1).is_some_and(|(_, o)| *o);
        s.unpark(&key, ordered, n).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_reversible_and_recognised() {
        let at = Utc.with_ymd_and_hms(2026, 2, 28, 23, 59, 59).unwrap()
            + chrono::TimeDelta::microseconds(123_456);
        let parked = at + PARK_OFFSET;
        assert!(is_parked(parked));
        assert!(!is_parked(at));
        assert_eq!(shown(parked), at);
        assert_eq!(shown(at), at);
        // A dependant's far-future hold is not a parked item.
        let held = Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0).unwrap();
        assert!(!is_parked(held));
        assert_eq!(shown(held), held);
        // The oldest item ever parked still reads as parked.
        assert!(is_parked(park_floor() + PARK_OFFSET));
    }

    #[test]
    fn the_range_in_seconds_is_the_range_in_dates() {
        assert_eq!(parked_from().timestamp(), PARKED_FROM_SECS);
        assert_eq!(parked_before().timestamp(), PARKED_BEFORE_SECS);
        assert!(is_parked(parked_from()));
        assert!(!is_parked(
            parked_from() - chrono::TimeDelta::microseconds(1)
        ));
        assert!(!is_parked(parked_before()));
    }

    #[test]
    fn a_claim_gives_back_one_per_item_of_a_parked_group() {
        let t = Uuid::from_u128(7);
        let parked = vec![(t, "k".to_owned(), "big".to_owned())];
        let claimed = [
            (t, "k", Some("big")),
            (t, "k", Some("other")),
            (t, "k", None),
            (t, "k", Some("big")),
            (Uuid::from_u128(8), "k", Some("big")),
        ];
        let back = give_back(&parked, claimed.into_iter());
        assert_eq!(back, vec![((t, "k".to_owned(), "big".to_owned()), 2)]);
    }

    #[test]
    fn the_window_is_four_rounds_of_slots_at_least_the_minimum() {
        assert_eq!(window(1), PARK_WINDOW_MIN);
        assert_eq!(window(100), 400);
        assert!(window(1) < deep(1));
        assert!(window(1000) < deep(1000));
    }
}
