//! The fair-share entity of the storage seam: weights per tenant
//! ([`FairWeight`]), the lanes an operator took fair share off or set to
//! share by group ([`FairLane`]), the pure rule every backend's claim
//! splits its starts by ([`Passes::share`], [`Passes::share_work`]; the
//! inner level by group in [`groups`]) and the [`FairnessStore`] trait.
//!
//! Inside each lane, when more than one tenant has due work, a claim's
//! starts are shared between those tenants in proportion to their weights
//! (default 1) by stride scheduling: each (lane, tenant) keeps a pass; a
//! start of tenant `t` moves its pass by `stride(t) = PASS_SCALE /
//! weight(t)`; a claim takes, one start at a time, the tenant with due work
//! whose pass is least (ties: the tenant whose next item comes first in
//! priority then age order), and its next item in priority then age order.
//! The lane keeps a virtual time `vt`: the pass of the latest start (the
//! least pass among tenants with due work at that start). A tenant's pass
//! is read as `max(stored, vt)`, so a tenant that was idle (or held back by
//! a limit) comes back level with the others and never with credit banked.
//!
//! Invariants every backend keeps (contract cases in `contract/fairness.rs`):
//! - The share is per tenant: how many items or groups a tenant spreads its
//!   backlog over changes nothing (the pass moves per start of the tenant,
//!   whichever group the item is of).
//! - Work-conserving: a tenant with nothing due (or all of it held back by
//!   a limit, a rate or an ordered group) is skipped; a lone tenant takes
//!   the whole claim, and a lane whose due work is one tenant's claims as
//!   without fair share (no pass is read or written).
//! - The passes a claim reads and writes are serialised with it
//!   (PostgreSQL: the lane's row lock, taken first in the claim's
//!   transaction; SQLite: the single writer; memory: the store's lock).
//! - A lane an operator turned fair share off for claims in priority then
//!   age order, as before.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Result};

mod cache;
pub mod groups;

pub use cache::{PassCache, pass_version};

/// The pass a start at weight 1 moves its tenant by.
pub const PASS_SCALE: i64 = 1_000_000;
/// The largest weight a tenant may be given.
pub const MAX_WEIGHT: u32 = 1_000;
/// The weight of a tenant no operator set one for.
pub const DEFAULT_WEIGHT: u32 = 1;
/// The tenant id under which a lane's own pass row (its virtual time) is
/// stored beside its tenants' rows: the max UUID (RFC 9562), which no
/// tenant is given (the nil tenant is a real one: items enqueued without
/// a tenant are its).
pub const LANE_ROW: Uuid = Uuid::max();
/// How many idle pass rows one sweep pass deletes at most.
pub const FAIR_PASSES_PURGE_BATCH: u32 = 10_000;
/// How long a backend keeps the fair-share settings it read (as the
/// limits', [`LIMITS_CACHE_TTL`](crate::limits::LIMITS_CACHE_TTL)).
pub const FAIR_CACHE_TTL: std::time::Duration = crate::limits::LIMITS_CACHE_TTL;

/// Checks a weight: 1 to [`MAX_WEIGHT`].
///
/// # Errors
/// [`Error::InvalidInput`] on `weight`.
pub fn validate_weight(weight: u32) -> Result<()> {
    if (1..=MAX_WEIGHT).contains(&weight) {
        return Ok(());
    }
    Err(Error::invalid(
        "weight",
        format!("must be 1 to {MAX_WEIGHT}, got {weight}"),
    ))
}

/// How far one start moves a tenant of `weight` (at least 1).
pub fn stride(weight: u32) -> i64 {
    PASS_SCALE / i64::from(weight.clamp(1, MAX_WEIGHT))
}

/// An operator's weight for a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairWeight {
    /// The tenant.
    pub tenant: Uuid,
    /// Its weight (1 to [`MAX_WEIGHT`]).
    pub weight: u32,
    /// When it was set (the store's clock).
    pub set_at: DateTime<Utc>,
    /// Who set it.
    pub set_by: Uuid,
}

/// A lane's fair-share setting as an operator left it (a lane with no row
/// shares fairly).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairLane {
    /// The lane.
    pub lane: String,
    /// Whether fair share is on.
    pub on: bool,
    /// Whether each tenant's share is shared again between its groups
    /// ([`groups`]); false: by tenant only.
    #[serde(default)]
    pub by_group: bool,
    /// When it was set (the store's clock).
    pub set_at: DateTime<Utc>,
    /// Who set it.
    pub set_by: Uuid,
}

/// Every fair-share setting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairSettings {
    /// The weights operators set, by tenant.
    pub weights: Vec<FairWeight>,
    /// The lanes with a stored setting.
    pub lanes: Vec<FairLane>,
}

impl FairSettings {
    /// The weight of `tenant` ([`DEFAULT_WEIGHT`] when none is set).
    pub fn weight(&self, tenant: Uuid) -> u32 {
        self.weights
            .iter()
            .find(|w| w.tenant == tenant)
            .map_or(DEFAULT_WEIGHT, |w| w.weight)
    }

    /// Whether fair share is on for `lane` (on unless turned off).
    pub fn on(&self, lane: &str) -> bool {
        self.lanes
            .iter()
            .find(|l| l.lane == lane)
            .is_none_or(|l| l.on)
    }

    /// How `lane` shares its starts, as operators read it: `"off"`, `"by
    /// tenant"` or `"by group"`.
    pub fn mode(&self, lane: &str) -> &'static str {
        if !self.on(lane) {
            "off"
        } else if self.by_group(lane) {
            "by group"
        } else {
            "by tenant"
        }
    }

    /// Whether `lane` shares each tenant's starts between its groups (fair
    /// share on, by group).
    pub fn by_group(&self, lane: &str) -> bool {
        self.lanes
            .iter()
            .find(|l| l.lane == lane)
            .is_some_and(|l| l.on && l.by_group)
    }
}

/// How far [`FairShare::waiting`] counts a tenant's due items in a lane.
///
/// Why a cap: the shares are read by page views, the API, why-waiting and
/// the gauges, and an exact count per tenant reads every pending row (73 ms
/// at 200,000 pending, seconds at millions). Fair share itself needs only
/// to know who waits; a lane's exact backlog is in the counts.
pub const FAIR_WAITING_CAP: u64 = 1_000;

/// One tenant's share of one lane, as [`FairnessStore::fair_shares`] reads
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairShare {
    /// The lane.
    pub lane: String,
    /// The tenant.
    pub tenant: Uuid,
    /// Its weight.
    pub weight: u32,
    /// Its items pending and due in the lane now, counted up to
    /// [`FAIR_WAITING_CAP`] (a tenant at the cap has at least that many).
    pub waiting: u64,
    /// Starts the fair-share rule gave it in the lane since its pass row
    /// was made (a row idle long enough is collected and starts again).
    pub started: u64,
    /// Its pass, lifted to the lane's virtual time.
    pub pass: i64,
    /// The lane's virtual time.
    pub lane_vt: i64,
}

/// The shares the SQL stores read: one per (lane, tenant) with a stored
/// pass row or due work, from the pass rows `(lane, tenant, pass,
/// started)` (each lane's own row under [`LANE_ROW`] holding its virtual
/// time) and the due counts `(lane, tenant, n)`. A pair with no row of its
/// own stands at its lane's virtual time, as a claim would read it.
pub fn shares(
    settings: &FairSettings,
    passes: impl IntoIterator<Item = (String, Uuid, i64, u64)>,
    waiting: impl IntoIterator<Item = (String, Uuid, u64)>,
) -> Vec<FairShare> {
    let mut vts: BTreeMap<String, i64> = BTreeMap::new();
    let mut rows: BTreeMap<(String, Uuid), (u64, i64, u64)> = BTreeMap::new();
    for (lane, t, pass, started) in passes {
        if t == LANE_ROW {
            vts.insert(lane, pass);
        } else {
            rows.insert((lane, t), (0, pass, started));
        }
    }
    for (lane, t, n) in waiting {
        rows.entry((lane, t)).or_insert((0, i64::MIN, 0)).0 = n;
    }
    rows.into_iter()
        .map(|((lane, tenant), (waiting, pass, started))| {
            let vt = vts.get(&lane).copied().unwrap_or(0);
            FairShare {
                weight: settings.weight(tenant),
                lane,
                tenant,
                waiting,
                started,
                pass: pass.max(vt),
                lane_vt: vt,
            }
        })
        .collect()
}

/// The passes of one lane as a claim read them (under the claim's
/// serialisation), moved by the starts it gives.
#[derive(Debug, Default, Clone)]
pub struct Passes {
    vt: i64,
    /// Why foldhash: every claim reads the pass of each tenant with work
    /// in the lane ([`Passes::quotas`]), 10,000 lookups at 10,000 tenants,
    /// and the standard SipHash made that read a quarter of a
    /// millisecond of every claim. foldhash is several times quicker,
    /// seeded per map (so tenant ids an operator picks cannot be chosen
    /// to collide), and already in the tree through hashbrown.
    stored: HashMap<Uuid, i64, foldhash::fast::RandomState>,
    changed: BTreeMap<Uuid, (i64, u64)>,
}

impl Passes {
    /// From the lane's virtual time and the stored passes (a tenant not
    /// given has none: it is level with `vt`).
    pub fn new(vt: i64, stored: impl IntoIterator<Item = (Uuid, i64)>) -> Passes {
        Passes {
            vt,
            stored: stored.into_iter().collect(),
            changed: BTreeMap::new(),
        }
    }

    /// The lane's virtual time.
    pub fn vt(&self) -> i64 {
        self.vt
    }

    /// These passes as they stand after the starts given, with nothing
    /// left to write: what a claim that wrote them may keep for the next.
    pub fn settled(&self) -> Passes {
        Passes {
            vt: self.vt,
            stored: self.stored.clone(),
            changed: BTreeMap::new(),
        }
    }

    /// `tenant`'s pass, lifted to the lane's virtual time.
    pub fn pass(&self, tenant: Uuid) -> i64 {
        self.stored
            .get(&tenant)
            .copied()
            .unwrap_or(i64::MIN)
            .max(self.vt)
    }

    /// The passes moved by [`Passes::share`]: tenant → (new pass, starts
    /// given), to write back with the claim.
    pub fn changed(&self) -> &BTreeMap<Uuid, (i64, u64)> {
        &self.changed
    }

    /// How many of `limit` starts each of `tenants` (with its weight)
    /// would get if each had enough due work, in the order they would get
    /// their first: what a backend reads candidates for. Nothing moves.
    pub fn quotas(&self, tenants: &[(Uuid, u32)], limit: u32) -> Vec<(Uuid, u32)> {
        // Only the `limit` least (pass, tenant) can be given a start: a
        // start goes to the least and moves it up, so a tenant is given
        // one only after every tenant that stood below it was. They are
        // kept in a heap of that size while the tenants are read once, so
        // a claim costs one pass lookup per tenant and no allocation the
        // size of the lane's tenants.
        let k = (limit as usize).min(tenants.len());
        if k == 0 {
            return Vec::new();
        }
        let mut least: BinaryHeap<(i64, Uuid, usize)> = BinaryHeap::with_capacity(k + 1);
        for (i, (t, _)) in tenants.iter().enumerate() {
            let key = (self.pass(*t), *t, i);
            if least.len() < k {
                least.push(key);
            } else if least.peek().is_some_and(|top| key < *top) {
                least.pop();
                least.push(key);
            }
        }
        let mut heap: BinaryHeap<Reverse<(i64, Uuid, usize)>> =
            least.into_iter().map(Reverse).collect();
        // Starts given per tenant, in the order of their first.
        let mut got: Vec<(usize, u32)> = Vec::with_capacity(k);
        for _ in 0..limit {
            let Some(Reverse((pass, t, i))) = heap.pop() else {
                break;
            };
            match got.iter_mut().find(|(j, _)| *j == i) {
                Some((_, n)) => *n += 1,
                None => got.push((i, 1)),
            }
            heap.push(Reverse((pass + stride(tenants[i].1), t, i)));
        }
        got.into_iter().map(|(i, n)| (tenants[i].0, n)).collect()
    }

    /// Shares up to `limit` starts between `lists` (each a tenant, its
    /// weight, and its due candidates in priority then age order, `key`
    /// giving that order) by the stride rule of the module docs. `admit`
    /// is asked in the order starts are given (the limits, rates and
    /// ordered groups that apply); a candidate it refuses is skipped and
    /// its tenant keeps its pass. Returns the admitted in the order they
    /// were given.
    pub fn share<C, K: Ord + Clone>(
        &mut self,
        lists: Vec<(Uuid, u32, Vec<C>)>,
        limit: usize,
        key: impl Fn(&C) -> K,
        admit: impl FnMut(&C) -> bool,
    ) -> Vec<C> {
        let lists = lists
            .into_iter()
            .map(|(t, w, l)| (t, w, TenantWork::Items(l)))
            .collect();
        self.share_work(lists, limit, key, admit).0
    }

    /// [`Passes::share`] over each tenant's [`TenantWork`]: a tenant of a
    /// lane shared by group gives its starts out between its groups by
    /// the inner stride rule ([`groups`]). Returns the admitted in the
    /// order they were given, and each such tenant's inner passes as the
    /// starts moved them (to write back with the claim).
    pub fn share_work<C, K: Ord + Clone>(
        &mut self,
        lists: Vec<(Uuid, u32, TenantWork<C>)>,
        limit: usize,
        key: impl Fn(&C) -> K,
        mut admit: impl FnMut(&C) -> bool,
    ) -> (Vec<C>, BTreeMap<Uuid, Passes>) {
        let mut lists: Vec<(Uuid, u32, groups::Source<C>)> = lists
            .into_iter()
            .map(|(t, w, l)| (t, w, groups::Source::from(l)))
            .filter(|(_, _, l)| !l.is_empty())
            .collect();
        let mut heap: BinaryHeap<Reverse<(i64, K, Uuid, usize)>> = BinaryHeap::new();
        for (i, (t, _, l)) in lists.iter().enumerate() {
            if let Some(head) = l.head(&key) {
                heap.push(Reverse((self.pass(*t), key(head), *t, i)));
            }
        }
        let mut out = Vec::with_capacity(limit);
        while out.len() < limit {
            let Some(Reverse((pass, _, t, i))) = heap.pop() else {
                break;
            };
            let (_, weight, list) = &mut lists[i];
            // The tenant's first candidate the admission takes; those it
            // refuses stay pending (a limit only fills within a claim).
            let Some(c) = list.take(&key, &mut admit) else {
                continue;
            };
            out.push(c);
            let next = self.give(t, pass, stride(*weight));
            if let Some(head) = list.head(&key) {
                heap.push(Reverse((next, key(head), t, i)));
            }
        }
        let inner = lists
            .into_iter()
            .filter_map(|(t, _, l)| l.into_passes().map(|p| (t, p)))
            .filter(|(_, p)| !p.changed().is_empty())
            .collect();
        (out, inner)
    }

    /// Records `n` starts of `t` given one after another from its pass
    /// `from` (as [`Passes::share`] gives them: the first at `from`, each
    /// next one stride on), as a backend that shared the starts itself
    /// reports them (PostgreSQL's `fair_claim_call`, which takes the least
    /// virtual starts `from + i * stride`).
    pub fn record_starts(&mut self, t: Uuid, from: i64, stride: i64, n: u64) {
        let mut pass = from;
        for _ in 0..n {
            pass = self.give(t, pass, stride);
        }
    }

    /// Records a start of `t` at `pass` (the least among those with due
    /// work): the virtual time moves up to it and `t`'s pass on by
    /// `stride`. Returns `t`'s new pass.
    fn give(&mut self, t: Uuid, pass: i64, stride: i64) -> i64 {
        self.vt = self.vt.max(pass);
        let next = pass + stride;
        self.stored.insert(t, next);
        let e = self.changed.entry(t).or_insert((next, 0));
        *e = (next, e.1 + 1);
        next
    }
}

/// One tenant's due work as a claim hands it to [`Passes::share_work`].
#[derive(Debug)]
pub enum TenantWork<C> {
    /// Its candidates in the order it would start them (priority then age).
    Items(Vec<C>),
    /// Shared between its groups ([`groups`]): its inner passes (the
    /// tenant's group virtual time and each group's pass, groups named by
    /// [`groups::group_id`]) and each group's candidates in priority then
    /// age order.
    Groups(Passes, Vec<(Uuid, Vec<C>)>),
}

impl<C> TenantWork<C> {
    /// Whether no candidate is in it.
    pub fn is_empty(&self) -> bool {
        match self {
            TenantWork::Items(l) => l.is_empty(),
            TenantWork::Groups(_, lists) => lists.iter().all(|(_, l)| l.is_empty()),
        }
    }
}

/// How old a lane's tenant list may be and still serve a claim while it
/// is read again; older, the claim reads it itself.
pub const STALE_LIST_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How many times a claim draws the quotas again after tenants of its list
/// turned out to have nothing due.
pub const FAIR_ROUNDS: usize = 3;

/// A lane's tenant list: when it was read, at which epoch, the tenants,
/// and how long the read took.
type Listed = (
    std::time::Instant,
    u64,
    std::sync::Arc<Vec<Uuid>>,
    std::time::Duration,
);

/// How many times its own cost a lane's tenant list is kept before it is
/// read again (at least [`FAIR_CACHE_TTL`]).
///
/// Why: the read is one index descent per tenant. At 10,000 tenants it
/// takes 65–220 ms on SQLite and tens of ms on PostgreSQL, and read every
/// [`FAIR_CACHE_TTL`] it took a fifth to a third of a core beside the
/// claims (their p99 came from it). Kept ten times its cost, the reads
/// take at most a tenth of a core, and a lane of a few tenants (a read
/// of well under 50 ms) is read every [`FAIR_CACHE_TTL`] as before.
pub const LIST_COST_FACTOR: u32 = 10;

/// When a tenant list that took `took` to read is read again: after
/// [`FAIR_CACHE_TTL`], or [`LIST_COST_FACTOR`] times its cost if that is
/// longer, but always within half of [`STALE_LIST_LIMIT`] (so the read
/// behind the claims lands before the list is too old to serve).
pub fn list_refresh_after(took: std::time::Duration) -> std::time::Duration {
    (took * LIST_COST_FACTOR).clamp(FAIR_CACHE_TTL, STALE_LIST_LIMIT / 2)
}

/// Per lane, the tenants with pending work when last read, and when; void
/// once this process enqueues or wakes a lane (a claimer's cache: a
/// tenant another process enqueued for is listed within
/// [`FAIR_CACHE_TTL`] of its enqueue).
#[derive(Debug, Default)]
pub struct TenantLists {
    slot: std::sync::Mutex<std::collections::HashMap<String, Listed>>,
    epoch: std::sync::atomic::AtomicU64,
    /// The lanes whose list is being read again in the background.
    reading: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Per (lane, tenant), in a lane shared by group: the tenant's groups
    /// with pending work in the lane ([`groups::NO_GROUP`] for its
    /// ungrouped items), when read and at which epoch.
    groups: std::sync::Mutex<std::collections::HashMap<(String, Uuid), GroupListed>>,
}

/// A tenant's group list: when it was read, at which epoch, the groups.
type GroupListed = (std::time::Instant, u64, std::sync::Arc<groups::GroupList>);

/// How many (lane, tenant) group lists a process keeps at most (beyond,
/// it forgets them all and reads again).
const GROUP_LISTS_KEPT: usize = 10_000;

impl TenantLists {
    /// The current epoch: moved by every [`TenantLists::touch`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forgets every list (work was enqueued or released).
    pub fn touch(&self) {
        self.epoch
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// `lane`'s list if read at the current epoch within
    /// [`STALE_LIST_LIMIT`], and whether it is due to be read again
    /// ([`list_refresh_after`] its read's cost).
    pub fn get(&self, lane: &str) -> Option<(std::sync::Arc<Vec<Uuid>>, bool)> {
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Relaxed);
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.get(lane)
            .filter(|(at, e, _, _)| *e == epoch && at.elapsed() < STALE_LIST_LIMIT)
            .map(|(at, _, t, took)| (t.clone(), at.elapsed() >= list_refresh_after(*took)))
    }

    /// Marks `lane`'s list as being read again; false if it already is.
    pub fn start_reading(&self, lane: &str) -> bool {
        self.reading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lane.to_owned())
    }

    /// Forgets `lane`'s list: the next claim reads it.
    pub fn forget(&self, lane: &str) {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(lane);
    }

    /// Marks `lane`'s list as no longer being read again.
    pub fn done_reading(&self, lane: &str) {
        self.reading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(lane);
    }

    /// `tenant`'s group list in `lane` if read at the current epoch within
    /// [`FAIR_CACHE_TTL`].
    pub fn groups(&self, lane: &str, tenant: Uuid) -> Option<std::sync::Arc<groups::GroupList>> {
        let epoch = self.epoch();
        let slot = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        slot.get(&(lane.to_owned(), tenant))
            .filter(|(at, e, _)| *e == epoch && at.elapsed() < FAIR_CACHE_TTL)
            .map(|(_, _, g)| g.clone())
    }

    /// Keeps `groups` as `tenant`'s group list in `lane` read at `epoch`.
    pub fn put_groups(
        &self,
        lane: &str,
        tenant: Uuid,
        epoch: u64,
        groups: std::sync::Arc<groups::GroupList>,
    ) {
        let mut slot = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        if slot.len() >= GROUP_LISTS_KEPT {
            slot.clear();
        }
        slot.insert(
            (lane.to_owned(), tenant),
            (std::time::Instant::now(), epoch, groups),
        );
    }

    /// Forgets `tenant`'s group list in `lane`: the next claim reads it.
    pub fn forget_groups(&self, lane: &str, tenant: Uuid) {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(lane.to_owned(), tenant));
    }

    /// Keeps `tenants` as `lane`'s list read at `epoch` (the read took
    /// `took`), unless a list of a later epoch is kept already (a
    /// background read that began before this process's last enqueue).
    pub fn put(
        &self,
        lane: &str,
        epoch: u64,
        tenants: std::sync::Arc<Vec<Uuid>>,
        took: std::time::Duration,
    ) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.get(lane).is_some_and(|(_, e, _, _)| *e > epoch) {
            return;
        }
        slot.insert(
            lane.to_owned(),
            (std::time::Instant::now(), epoch, tenants, took),
        );
    }
}

/// The rounds in which a fair claim reads its candidates: each round asks
/// [`Passes::quotas`] which of the tenants still alive this claim may
/// start and reads those not read yet; a tenant whose list came back empty
/// (nothing due: a listed tenant may have none, the list being up to
/// [`FAIR_CACHE_TTL`] old) is dropped and the quotas drawn again, at most
/// [`FAIR_ROUNDS`] times, so the claim stays work-conserving.
#[derive(Debug)]
pub struct Rounds {
    alive: Vec<(Uuid, u32)>,
    read: std::collections::HashSet<Uuid>,
    left: usize,
}

impl Rounds {
    /// Rounds over `alive` (each tenant with its weight).
    pub fn new(alive: Vec<(Uuid, u32)>) -> Rounds {
        Rounds {
            alive,
            read: std::collections::HashSet::new(),
            left: FAIR_ROUNDS,
        }
    }

    /// The tenants to read this round, each with its quota of `limit`
    /// starts under `passes`; empty when the rounds are done.
    pub fn next(&mut self, passes: &Passes, limit: u32) -> Vec<(Uuid, u32)> {
        if self.left == 0 {
            return Vec::new();
        }
        self.left -= 1;
        let fresh: Vec<(Uuid, u32)> = passes
            .quotas(&self.alive, limit)
            .into_iter()
            .filter(|(t, _)| !self.read.contains(t))
            .collect();
        self.read.extend(fresh.iter().map(|(t, _)| *t));
        fresh
    }

    /// After a round: drops the tenants that came back with nothing
    /// (`empty`); whether another round is wanted.
    pub fn settle(&mut self, empty: &std::collections::HashSet<Uuid>) -> bool {
        if empty.is_empty() {
            self.left = 0;
            return false;
        }
        self.alive.retain(|(t, _)| !empty.contains(t));
        self.left > 0
    }
}

/// The fair-share settings as a claimer last read them, for
/// [`FAIR_CACHE_TTL`]; cleared when this process changes them.
#[derive(Debug, Default)]
pub struct FairCache {
    slot: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<FairSettings>)>>,
}

impl FairCache {
    /// The cached settings, if read within the TTL.
    pub fn fresh(&self) -> Option<std::sync::Arc<FairSettings>> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < FAIR_CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    /// Keeps `settings` as read now.
    pub fn put(&self, settings: FairSettings) -> std::sync::Arc<FairSettings> {
        let v = std::sync::Arc::new(settings);
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), v.clone()));
        v
    }

    /// Forgets the cached settings.
    pub fn clear(&self) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Jain's fairness index of `shares` (each a tenant's starts over its
/// weight): 1 when equal, `1/n` when one tenant took everything.
pub fn jain(shares: &[f64]) -> f64 {
    let n = shares.len() as f64;
    let sum: f64 = shares.iter().sum();
    let sq: f64 = shares.iter().map(|x| x * x).sum();
    if n == 0.0 || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n * sq)
}

/// The fair-share entity of the storage seam (system operations).
#[async_trait]
pub trait FairnessStore: Send + Sync {
    /// Sets `tenant`'s weight (insert or replace), stamping the store's
    /// clock and `actor`. The caller has validated it ([`validate_weight`]).
    async fn fair_weight_set(&self, tenant: Uuid, weight: u32, actor: Uuid) -> Result<FairWeight>;

    /// Removes `tenant`'s weight (back to [`DEFAULT_WEIGHT`]); whether it
    /// had one.
    async fn fair_weight_clear(&self, tenant: Uuid) -> Result<bool>;

    /// Turns fair share on or off for `lane`, by tenant or (`by_group`,
    /// with `on`) by group inside each tenant's share.
    async fn fair_lane_set(
        &self,
        lane: &str,
        on: bool,
        by_group: bool,
        actor: Uuid,
    ) -> Result<FairLane>;

    /// Every stored setting.
    async fn fair_settings(&self) -> Result<FairSettings>;

    /// Each tenant's share of each lane where it has a pass or due work.
    async fn fair_shares(&self) -> Result<Vec<FairShare>>;

    /// The stored group passes of `tenant` in `lane` (a lane shared by
    /// group): `(group key, pass, starts)`, the tenant's group virtual
    /// time under [`groups::GROUP_VT`]; empty when none is stored.
    async fn fair_group_passes(&self, lane: &str, tenant: Uuid) -> Result<Vec<(String, i64, u64)>>;

    /// Deletes up to `batch` idle pass rows (a pass at or behind its
    /// lane's virtual time is the same as none), the groups' passes
    /// included (at or behind their tenant's group virtual time, or with
    /// nothing pending); how many.
    async fn fair_passes_purge(&self, batch: u32) -> Result<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn run(p: &mut Passes, lists: Vec<(Uuid, u32, Vec<u32>)>, limit: usize) -> Vec<u32> {
        p.share(lists, limit, |c| *c, |_| true)
    }

    /// The quotas by a heap over every tenant, as before the preselection.
    fn quotas_by_full_heap(p: &Passes, tenants: &[(Uuid, u32)], limit: u32) -> Vec<(Uuid, u32)> {
        let mut heap: BinaryHeap<Reverse<(i64, Uuid, usize)>> = tenants
            .iter()
            .enumerate()
            .map(|(i, (t, _))| Reverse((p.pass(*t), *t, i)))
            .collect();
        let mut got = vec![0u32; tenants.len()];
        let mut order = Vec::new();
        for _ in 0..limit {
            let Some(Reverse((pass, t, i))) = heap.pop() else {
                break;
            };
            if got[i] == 0 {
                order.push(i);
            }
            got[i] += 1;
            heap.push(Reverse((pass + stride(tenants[i].1), t, i)));
        }
        order.into_iter().map(|i| (tenants[i].0, got[i])).collect()
    }

    #[test]
    fn quotas_from_the_least_passes_equal_the_full_heaps() {
        // A small deterministic generator: passes and weights spread so
        // that ties, stored and unstored tenants and heavy weights mix.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..300u64 {
            let n = 1 + next(60) as usize;
            let vt = next(5) as i64 * PASS_SCALE;
            let mut tenants = Vec::with_capacity(n);
            let mut stored = Vec::new();
            for i in 0..n {
                let tn = t(1000 * u128::from(case) + i as u128);
                tenants.push((tn, 1 + next(4) as u32 * 3));
                if next(3) > 0 {
                    stored.push((tn, next(8) as i64 * PASS_SCALE / 2));
                }
            }
            let p = Passes::new(vt, stored);
            for limit in [0, 1, 2, 5, 10, 64, 200] {
                assert_eq!(
                    p.quotas(&tenants, limit),
                    quotas_by_full_heap(&p, &tenants, limit),
                    "case {case}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn two_tenants_alternate_and_a_lone_one_takes_all() {
        let mut p = Passes::new(0, []);
        let a: Vec<u32> = (0..100).collect();
        let b: Vec<u32> = (1000..1010).collect();
        let got = run(&mut p, vec![(t(1), 1, a.clone()), (t(2), 1, b)], 10);
        let bs = got.iter().filter(|c| **c >= 1000).count();
        assert_eq!(bs, 5, "{got:?}");
        let mut lone = Passes::new(0, []);
        assert_eq!(run(&mut lone, vec![(t(1), 1, a)], 10).len(), 10);
    }

    #[test]
    fn weights_split_three_to_one_and_priority_orders_within() {
        let mut p = Passes::new(0, []);
        let a: Vec<u32> = (0..1000).collect();
        let b: Vec<u32> = (10_000..11_000).collect();
        let mut na = 0;
        for _ in 0..100 {
            let got = run(&mut p, vec![(t(1), 3, a.clone()), (t(2), 1, b.clone())], 4);
            na += got.iter().filter(|c| **c < 10_000).count();
        }
        assert_eq!(na, 300);
        let got = Passes::new(0, []).share(vec![(t(1), 1, vec![3u32, 1, 2])], 3, |c| *c, |_| true);
        assert_eq!(got, vec![3, 1, 2], "the list's own order is kept");
    }

    #[test]
    fn an_idle_tenant_banks_no_credit() {
        let mut p = Passes::new(0, []);
        let a: Vec<u32> = (0..1000).collect();
        for _ in 0..50 {
            run(&mut p, vec![(t(1), 1, a.clone())], 10);
        }
        // B arrives after A took 500 starts alone: they alternate.
        let b: Vec<u32> = (5000..5100).collect();
        let got = run(&mut p, vec![(t(1), 1, a), (t(2), 1, b)], 20);
        let bs = got.iter().filter(|c| **c >= 5000).count();
        assert!((9..=11).contains(&bs), "{bs} of 20: {got:?}");
    }

    #[test]
    fn a_refused_candidate_keeps_its_tenants_pass_and_quotas_split() {
        let mut p = Passes::new(0, []);
        let got = p.share(
            vec![(t(1), 1, vec![1u32, 2]), (t(2), 1, vec![10, 11, 12])],
            4,
            |c| *c,
            |c| *c != 1 && *c != 2,
        );
        assert_eq!(got, vec![10, 11, 12], "work-conserving");
        assert_eq!(p.changed().get(&t(1)), None);
        let q = Passes::new(0, []).quotas(&[(t(1), 3), (t(2), 1)], 8);
        assert_eq!(q, vec![(t(1), 6), (t(2), 2)]);
        assert!((jain(&[1.0, 1.0]) - 1.0).abs() < 1e-9);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-9);
        assert!(validate_weight(0).is_err() && validate_weight(3).is_ok());
    }
}
