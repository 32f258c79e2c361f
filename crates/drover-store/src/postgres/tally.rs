//! The tally of an items child before its drop (`rotate.rs`): per count
//! group, the final rows the drop removes and how many of them the count
//! rollup holds. Read in one statement for a small child, in page slices
//! across purge passes for a large one ([`TallyLimits`]); the store keeps a
//! large child's tally in progress between passes.
//!
//! Invariant: a slice is kept only if every row it counts was settled, so a
//! completed tally's rows all leave `item_counts` at the drop.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use super::child::{Child, checked_child};
use drover_core::error::Result;

macro_rules! sql {
    ($name:ident, $file:literal) => {
        const $name: &str = include_str!(concat!("../../sql/postgres/", $file));
    };
}
sql!(ITEM_CHILD_TALLY, "item_child_tally.sql");
sql!(ITEM_CHILD_TALLY_PAGES, "item_child_tally_pages.sql");
sql!(ITEM_CHILD_PAGES, "item_child_pages.sql");

/// How a child's tally is read: one statement for a small child, slices
/// across purge passes for a large one, so that no pass outlasts the
/// sweep's step timeout (a child of a day at 800 items/s is 69 million
/// rows, and its one-statement tally 18 to 33 s here: docs/design.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TallyLimits {
    /// A child of at most this many heap pages is tallied in one statement,
    /// in the transaction that drops it. Default [`TALLY_ONE_PASS_PAGES`].
    pub one_pass_pages: i64,
    /// A larger child is tallied this many pages per statement. Default
    /// [`TALLY_SLICE_PAGES`].
    pub slice_pages: i64,
    /// For at most this long per pass; the pass that completes the tally
    /// drops the child. Default [`TALLY_PASS_BUDGET`].
    pub pass_budget: std::time::Duration,
}

/// The largest child tallied in one statement by default: 40,000 pages
/// (312 MiB of heap, about 1.7 million items of the bench's size; about a
/// second to read here).
pub const TALLY_ONE_PASS_PAGES: i64 = 40_000;
/// A slice of a large child's tally by default: 20,000 pages (about half
/// a second here).
pub const TALLY_SLICE_PAGES: i64 = 20_000;
/// How long one pass spends on a large child's tally by default: well
/// inside the sweep's default 10 s step timeout, with the rest of the
/// purge after it.
pub const TALLY_PASS_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

impl Default for TallyLimits {
    fn default() -> Self {
        TallyLimits {
            one_pass_pages: TALLY_ONE_PASS_PAGES,
            slice_pages: TALLY_SLICE_PAGES,
            pass_budget: TALLY_PASS_BUDGET,
        }
    }
}

/// A count group: tenant, lane, kind, status.
pub(super) type GroupKey = (Uuid, String, String, String);

/// One count group's part of a tally.
pub(super) struct GroupTally {
    pub(super) key: GroupKey,
    /// Final rows past the cutoff.
    pub(super) n: i64,
    /// Of those, the rows the count rollup holds.
    pub(super) settled: i64,
}

/// A large child's tally in progress (`rotate_sliced`).
#[derive(Debug)]
pub(super) struct Partial {
    /// The cutoff pinned when the tally began.
    pub(super) before: DateTime<Utc>,
    /// The census taken then.
    pub(super) survivors: i64,
    /// The first page not tallied yet.
    pub(super) next_page: i64,
    /// Per group: rows, settled rows.
    pub(super) groups: BTreeMap<GroupKey, (i64, i64)>,
}

impl Partial {
    pub(super) fn add(&mut self, rows: &[GroupTally]) {
        for g in rows {
            let e = self.groups.entry(g.key.clone()).or_insert((0, 0));
            e.0 += g.n;
            e.1 += g.settled;
        }
    }

    pub(super) fn tally(&self) -> Vec<GroupTally> {
        self.groups
            .iter()
            .map(|(key, &(n, settled))| GroupTally {
                key: key.clone(),
                n,
                settled,
            })
            .collect()
    }
}

/// The store's tallies in progress and their limits.
#[derive(Debug, Default)]
pub(super) struct Tallies {
    limits: TallyLimits,
    partial: HashMap<String, Partial>,
}

impl PgStore {
    fn tallies(&self) -> std::sync::MutexGuard<'_, Tallies> {
        // A panic while holding it leaves whole values only.
        self.tallies.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn tally_take(&self, child: &str) -> Option<Partial> {
        self.tallies().partial.remove(child)
    }

    pub(super) fn tally_keep(&self, child: &str, p: Partial) {
        self.tallies().partial.insert(child.to_owned(), p);
    }

    /// How this store tallies the items children its purge drops.
    pub fn items_tally_limits(&self) -> TallyLimits {
        self.tallies().limits
    }

    /// Sets how this store tallies the items children its purge drops
    /// (tests and operators with unusual children; the defaults suit the
    /// sweep's default step timeout). Tallies in progress are dropped.
    pub fn set_items_tally_limits(&self, limits: TallyLimits) {
        let mut t = self.tallies();
        t.limits = limits;
        t.partial.clear();
    }
}

/// A child's heap pages.
pub(super) async fn child_pages(store: &PgStore, child: &Child) -> Result<i64> {
    let mut tx = store.begin_system().await?;
    let pages = sqlx::query_scalar(ITEM_CHILD_PAGES)
        .persistent(store.persistent)
        .bind(checked_child(&child.name)?)
        .fetch_one(&mut *tx)
        .await?;
    tx.rollback().await?;
    Ok(pages)
}

/// The final rows past `before` per count group, of the whole child or of
/// its pages `[from, to)`.
pub(super) async fn tally_rows(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    store: &PgStore,
    child: &Child,
    before: DateTime<Utc>,
    settled_to: DateTime<Utc>,
    pages: Option<(i64, i64)>,
) -> Result<Vec<GroupTally>> {
    let q = match pages {
        None => sqlx::query(ITEM_CHILD_TALLY),
        Some(_) => sqlx::query(ITEM_CHILD_TALLY_PAGES),
    };
    let mut q = q
        .persistent(store.persistent)
        .bind(child.lo)
        .bind(child.hi)
        .bind(before)
        .bind(settled_to);
    if let Some((from, to)) = pages {
        q = q.bind(from).bind(to);
    }
    q.fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|r| {
            Ok(GroupTally {
                key: (
                    r.try_get("tenant_id")?,
                    r.try_get("lane")?,
                    r.try_get("kind")?,
                    r.try_get("status")?,
                ),
                n: r.try_get("n")?,
                settled: r.try_get("settled")?,
            })
        })
        .collect()
}
