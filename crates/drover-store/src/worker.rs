//! The worker entity's seam: [`WorkerStore`] keeps one liveness row per
//! worker process, stamped on the store's clock (the database clock on
//! PostgreSQL) so every reader judges liveness against one clock. A row
//! is never trusted for more than [`LOST_AFTER_BEATS`] of its own beat
//! intervals: past that it reads `lost`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use drover_core::error::Result;

/// A worker not offline whose last beat is older than this many of its own
/// beat intervals, by the store's clock, is listed as `lost`: it died
/// without shutting down. Two, so one late or failed publish never makes a
/// live worker look lost, while a dead one shows within two intervals.
pub const LOST_AFTER_BEATS: u32 = 2;

/// A worker's liveness row, as the dashboard reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRow {
    /// Worker id (unique per process run).
    pub id: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Lanes it drains.
    pub lanes: Vec<String>,
    /// Its capacity.
    pub capacity: i32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last published beat. The store stamps it with its own clock
    /// (the database clock on PostgreSQL) whatever the row carries, so
    /// liveness is judged against one clock.
    pub last_beat_at: DateTime<Utc>,
    /// `running`, `draining` or `offline` as the worker published it; on
    /// read, `lost` when not offline and no beat landed for
    /// [`LOST_AFTER_BEATS`] intervals.
    pub state: String,
    /// How often the worker beats, in milliseconds (at least 1).
    pub beat_interval_ms: i32,
    /// The kinds it handles (its registry's, sorted), so a reader can tell
    /// an item no live worker of its lane can run (migration 0035). Empty
    /// means not recorded (a row beaten before 0035): read as every kind,
    /// since a worker that claims always handles at least one.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// The drover version the worker runs (migration 0041); empty for a
    /// row beaten by an older worker.
    #[serde(default)]
    pub version: String,
}

impl WorkerRow {
    /// Whether the row says the worker is alive: `running` or `draining`
    /// (not `offline`, not `lost`).
    pub fn is_live(&self) -> bool {
        matches!(self.state.as_str(), "running" | "draining")
    }

    /// Whether it runs items of `kind` (an unrecorded list: any kind).
    pub fn handles(&self, kind: &str) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind)
    }
}

/// The workers table (system operations). A supertrait of
/// [`Store`](super::Store).
#[async_trait]
pub trait WorkerStore: Send + Sync {
    /// Publishes a worker's liveness row (insert or update), stamping
    /// `last_beat_at` with the store's clock (system operation).
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()>;

    /// Lists worker rows, most recent beat first, reporting `lost` for a
    /// worker that stopped beating (see [`LOST_AFTER_BEATS`]).
    async fn worker_list(&self) -> Result<Vec<WorkerRow>>;

    /// Deletes the rows of workers whose last beat is older than
    /// `older_than` by the store's clock (system operation). Returns how
    /// many.
    async fn worker_purge(&self, older_than: Duration) -> Result<u64>;
}
