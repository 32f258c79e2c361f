//! The dashboard's history and "what runs now": [`ThroughputStore`].
//!
//! The history is a rollup per minute, tenant, lane and kind of the items
//! that became done or failed (migration 0041), written by the sweep in
//! the settlement of the count rollup ([`ItemStore::counts_settle`]): the
//! hot path writes nothing more, a server restart blanks no chart, and a
//! read of the last day is a range of the rollup's primary key (its
//! leading column is the minute), never of the items table. Minutes not
//! settled yet (the sweep's last pass to now) are not in it yet; the
//! rollup keeps [`THROUGHPUT_KEEP`] and the settlement deletes older rows.
//!
//! The queue wait over time is a second, installation-wide rollup
//! (migration 0049): per minute and lane, the age of the oldest item that
//! was pending and due when the sweep looked, the largest of the minute's
//! passes ([`ThroughputStore::wait_record`]). The sweep reads that age for
//! its gauges already, so the record costs one small upsert per pass and
//! the hot path nothing; rows older than [`WAIT_KEEP`] are deleted by the
//! same call. A lane is shared by every tenant, so the rows carry no
//! tenant: the dashboard shows them only to a token not scoped to a
//! tenant.
//!
//! The items running now are the claimed rows, read through the partial
//! index of claimed rows (their number is bounded by the workers'
//! capacity, not by the table).
//!
//! [`ItemStore::counts_settle`]: crate::ItemStore::counts_settle

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::Result;

/// How long the rollup keeps a minute: two days, so the day chart is whole.
pub const THROUGHPUT_KEEP: chrono::TimeDelta = chrono::TimeDelta::hours(48);

/// How long the wait rollup keeps a minute: the day chart's window and
/// the hour of its first, partly covered bucket.
pub const WAIT_KEEP: chrono::TimeDelta = chrono::TimeDelta::hours(25);

/// One minute of one lane's queue wait (installation-wide).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitRow {
    /// The minute (its start).
    pub minute: DateTime<Utc>,
    /// The lane.
    pub lane: String,
    /// The largest age, in milliseconds, that the minute's sweep passes
    /// read of the lane's oldest pending and due item.
    pub oldest_ms: i64,
}

/// `at` rounded down to its minute (the rollups' key).
pub fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    at.duration_trunc(chrono::TimeDelta::minutes(1))
        .unwrap_or(at)
}

/// The most claimed rows one [`ThroughputStore::items_running`] returns.
pub const RUNNING_MAX: u32 = 1000;

/// How [`ThroughputStore::throughput`] groups the rollup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThroughputBy {
    /// One row per minute, every lane and kind summed (`lane` and `kind`
    /// empty): the charts.
    Minute,
    /// One row per lane and kind, every minute summed (`minute` is the
    /// query's `since`): the per-lane and per-kind tables.
    LaneKind,
}

/// What [`ThroughputStore::throughput`] reads.
#[derive(Debug, Clone)]
pub struct ThroughputQuery {
    /// Minutes at or after this one.
    pub since: DateTime<Utc>,
    /// Only this tenant's rows; `None`, every tenant's.
    pub tenant_id: Option<Uuid>,
    /// The grouping.
    pub by: ThroughputBy,
}

/// One row of the rollup, summed as the query groups it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThroughputRow {
    /// The minute (its start), or the query's `since` when summed over
    /// minutes.
    pub minute: DateTime<Utc>,
    /// The lane (empty when summed over lanes).
    pub lane: String,
    /// The kind (empty when summed over kinds).
    pub kind: String,
    /// Items that became done.
    pub done: i64,
    /// Items that became failed (the dead letter grew by them).
    pub failed: i64,
    /// Over the done items, the sum of available-to-done in milliseconds
    /// (the last run's wait in the queue plus its run).
    pub latency_ms_sum: i64,
    /// The longest of them.
    pub latency_ms_max: i64,
}

impl ThroughputRow {
    /// The mean available-to-done of the done items, in milliseconds.
    pub fn latency_ms_mean(&self) -> i64 {
        if self.done > 0 {
            self.latency_ms_sum / self.done
        } else {
            0
        }
    }
}

/// One claimed item: what a worker runs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningRow {
    /// The item's tenant.
    pub tenant_id: Uuid,
    /// The item.
    pub id: Uuid,
    /// Its kind.
    pub kind: String,
    /// Its lane.
    pub lane: String,
    /// The worker that holds the claim.
    pub worker: String,
    /// When the claim was taken (the row's last update).
    pub since: DateTime<Utc>,
}

/// The rollup's reads and the claimed rows (system operations). A
/// supertrait of [`Store`](super::Store).
#[async_trait]
pub trait ThroughputStore: Send + Sync {
    /// The rollup since `q.since`, grouped as `q.by` asks, oldest minute
    /// first (by lane then kind for [`ThroughputBy::LaneKind`]).
    async fn throughput(&self, q: &ThroughputQuery) -> Result<Vec<ThroughputRow>>;

    /// The claimed items, at most [`RUNNING_MAX`], oldest claim first.
    async fn items_running(&self) -> Result<Vec<RunningRow>>;

    /// Records, for the minute of `at`, each lane's oldest waiting age
    /// (seconds, as [`Gauges::oldest_age_seconds`] reads it; a lane
    /// already recorded in that minute keeps the larger age), then deletes
    /// the minutes older than `at - `[`WAIT_KEEP`]. Answers the rows
    /// deleted. Called by the sweep, never by the hot path.
    ///
    /// [`Gauges::oldest_age_seconds`]: crate::Gauges::oldest_age_seconds
    async fn wait_record(&self, at: DateTime<Utc>, ages: &[(String, f64)]) -> Result<u64>;

    /// The wait rollup's minutes at or after `since`, oldest first, then by
    /// lane.
    async fn wait_history(&self, since: DateTime<Utc>) -> Result<Vec<WaitRow>>;
}

/// Sums rows into the grouping `by` asks for (the memory backend's reads
/// and the SQL backends' agree on this shape).
pub fn group_rows(rows: Vec<ThroughputRow>, q: &ThroughputQuery) -> Vec<ThroughputRow> {
    let mut out: std::collections::BTreeMap<(DateTime<Utc>, String, String), ThroughputRow> =
        std::collections::BTreeMap::new();
    for r in rows {
        if r.minute < q.since {
            continue;
        }
        let key = match q.by {
            ThroughputBy::Minute => (r.minute, String::new(), String::new()),
            ThroughputBy::LaneKind => (q.since, r.lane.clone(), r.kind.clone()),
        };
        let e = out.entry(key.clone()).or_insert_with(|| ThroughputRow {
            minute: key.0,
            lane: key.1,
            kind: key.2,
            done: 0,
            failed: 0,
            latency_ms_sum: 0,
            latency_ms_max: 0,
        });
        e.done += r.done;
        e.failed += r.failed;
        e.latency_ms_sum += r.latency_ms_sum;
        e.latency_ms_max = e.latency_ms_max.max(r.latency_ms_max);
    }
    out.into_values().collect()
}

/// Ages in seconds as whole milliseconds, never negative (a clock a little
/// behind the item's own reads as no wait).
pub fn age_ms(age_seconds: f64) -> i64 {
    if age_seconds.is_finite() && age_seconds > 0.0 {
        (age_seconds * 1000.0).round() as i64
    } else {
        0
    }
}
