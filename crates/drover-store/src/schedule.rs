//! The schedule entity of the storage seam: one state row per schedule,
//! recording the last tick enqueued; its records, the [`ScheduleStore`]
//! trait, the [`MisfirePolicy`] a row names and the tick key every backend
//! stores ([`tick_key`]). `crate::periodic` re-exports them under their old
//! paths and keeps the scheduler.
//!
//! The table is **tenant-less in meaning, tenant-scoped in form**: a
//! schedule is declared in code once for the whole fleet, not per tenant,
//! and its items are enqueued as the system principal into the nil tenant.
//! So every row belongs to the nil tenant (a `tenant_id` column like every
//! table; on PostgreSQL RLS is enabled and forced, and the scheduler's
//! transactions run under the runtime role scoped to the nil tenant, the
//! tenant its items are inserted under).
//!
//! Invariants every backend keeps (the contract cases in
//! `store/contract/schedule.rs` check each):
//!
//! - [`ScheduleStore::schedule_upsert`] never moves `last_tick`.
//! - [`ScheduleStore::schedule_advance`] moves `last_tick` forward only, and
//!   only from the value the caller read (compare-and-set), and inserts the
//!   ticks' items in the same transaction: either the row moved and every
//!   item exists (inserted now or already there under its key), or nothing
//!   changed. Two schedulers racing over one range: exactly one advances.

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, NewItem};

/// A schedule as a scheduler declares it to the state table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDecl {
    /// The schedule's name (the row's key).
    pub name: String,
    /// Its cron expression.
    pub cron: String,
    /// Its IANA zone.
    pub zone: String,
    /// The kind its ticks enqueue.
    pub kind: String,
    /// The lane its items go to.
    pub lane: String,
    /// Its misfire policy.
    pub misfire: MisfirePolicy,
}

/// A schedule's state row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRow {
    /// The declaration last seen.
    pub decl: ScheduleDecl,
    /// The last tick enqueued; `None` until the first.
    pub last_tick: Option<DateTime<Utc>>,
    /// When the row was first declared (the database clock): the first tick
    /// is the first after it.
    pub created_at: DateTime<Utc>,
    /// When a scheduler last declared or advanced it: a row nobody has seen
    /// for a while belongs to a schedule removed from code.
    pub seen_at: DateTime<Utc>,
}

/// What [`ScheduleStore::schedule_advance`] is asked to do.
#[derive(Debug, Clone)]
pub struct AdvanceParams {
    /// The schedule.
    pub name: String,
    /// The `last_tick` the caller read: the compare of the compare-and-set.
    pub from: Option<DateTime<Utc>>,
    /// The new `last_tick`; must be later than `from`.
    pub to: DateTime<Utc>,
    /// The items to insert with the move (validated and stamped already).
    pub items: Vec<NewItem>,
}

/// What [`ScheduleStore::schedule_advance`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdvanceOutcome {
    /// The row moved to `to`; one result per item, in order.
    Advanced(Vec<InsertResult>),
    /// Another scheduler moved the row first (or it is gone): nothing changed.
    Stale,
}

/// The schedule state of the storage seam. Entity-then-verb; see the module
/// docs for the invariants.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Declares a schedule: inserts its row (`last_tick` empty, created and
    /// seen now) or refreshes the declaration and `seen_at` of an existing
    /// one, never touching `last_tick`. Returns the row.
    async fn schedule_upsert(&self, decl: &ScheduleDecl) -> Result<ScheduleRow>;

    /// Every schedule row, by name.
    async fn schedule_list(&self) -> Result<Vec<ScheduleRow>>;

    /// Moves `last_tick` from `from` to `to` and inserts `items` (never
    /// overwriting: a key already there is `KeyExists`), in one transaction.
    /// `Stale` when the row's `last_tick` is not `from`.
    async fn schedule_advance(&self, params: &AdvanceParams) -> Result<AdvanceOutcome>;

    /// Deletes rows not seen since `before`; returns how many.
    async fn schedule_purge(&self, before: DateTime<Utc>) -> Result<u64>;
}

impl ScheduleRow {
    /// True when a scheduler declared or advanced the row within
    /// `inactive_after` of `now`; a row that stays unseen belongs to a
    /// schedule removed from code.
    pub fn is_active(&self, now: DateTime<Utc>, inactive_after: std::time::Duration) -> bool {
        now - self.seen_at < drover_core::rules::to_chrono(inactive_after)
    }
}

/// The largest `max_backfill` a schedule may ask for: one run enqueues at
/// most this many items per schedule in one transaction, so the catch-up
/// after an outage stays one bounded write. Above it,
/// `Schedule::compile` (`crate::periodic`) refuses the schedule.
pub const MAX_BACKFILL_LIMIT: u32 = 10_000;

/// What a scheduler does with ticks that passed while no worker ran
/// (ticks later than the scheduler's misfire grace).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum MisfirePolicy {
    /// Drop every missed tick; only ticks within the grace (and the future
    /// ones) run.
    Skip,
    /// One catch-up item for all missed ticks, keyed by the latest of them.
    /// The default: a nightly report runs once after an outage.
    #[default]
    Once,
    /// Every missed tick, oldest first, but at most `max_backfill` of the
    /// latest ones (older ones are dropped and counted). `max_backfill` is
    /// 1 to [`MAX_BACKFILL_LIMIT`].
    All {
        /// The most missed ticks enqueued after one outage.
        max_backfill: u32,
    },
}

impl MisfirePolicy {
    /// `skip`, `once` or `all`, as the state table and the CLI show it.
    pub fn name(&self) -> &'static str {
        match self {
            MisfirePolicy::Skip => "skip",
            MisfirePolicy::Once => "once",
            MisfirePolicy::All { .. } => "all",
        }
    }

    /// The backfill cap (0 unless `all`).
    pub fn max_backfill(&self) -> u32 {
        match self {
            MisfirePolicy::All { max_backfill } => *max_backfill,
            _ => 0,
        }
    }

    /// The policy a state row names.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `misfire` for an unknown name.
    pub fn from_parts(name: &str, max_backfill: u32) -> Result<Self> {
        match name {
            "skip" => Ok(MisfirePolicy::Skip),
            "once" => Ok(MisfirePolicy::Once),
            "all" => Ok(MisfirePolicy::All { max_backfill }),
            other => Err(Error::invalid(
                "misfire",
                format!("{other:?} is not skip, once or all"),
            )),
        }
    }
}

impl fmt::Display for MisfirePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MisfirePolicy::All { max_backfill } => write!(f, "all (max {max_backfill})"),
            other => f.write_str(other.name()),
        }
    }
}

/// `periodic:<name>:<tick as RFC 3339 UTC, whole seconds>`.
pub fn tick_key(name: &str, tick: DateTime<Utc>) -> String {
    format!(
        "periodic:{name}:{}",
        tick.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}
