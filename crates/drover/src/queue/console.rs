//! What the operator's console reads beyond counts: the per-minute
//! history, the items running now, the sweep's last pass, the oldest open
//! transaction, an orchestration's signals, and a schedule's next ticks.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Queue;
use crate::Result;
use crate::store::orchestration::Signal;
use crate::store::throughput::{RunningRow, ThroughputQuery, ThroughputRow, WaitRow};

impl Queue {
    /// The per-minute history of done and failed items (system operation;
    /// see [`crate::store::throughput`]): what the sweep has settled.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn throughput(&self, q: &ThroughputQuery) -> Result<Vec<ThroughputRow>> {
        self.store().throughput(q).await
    }

    /// The queue wait history: per minute and lane since `since`, the
    /// oldest pending and due item's age as the sweep recorded it (system
    /// operation, installation-wide; see [`crate::store::throughput`]).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn wait_history(&self, since: DateTime<Utc>) -> Result<Vec<WaitRow>> {
        self.store().wait_history(since).await
    }

    /// The items claimed now, with their worker and since when (system
    /// operation), at most [`crate::store::throughput::RUNNING_MAX`].
    ///
    /// # Errors
    /// Storage errors.
    pub async fn items_running(&self) -> Result<Vec<RunningRow>> {
        self.store().items_running().await
    }

    /// When the last completed sweep pass of any process ended.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        self.store().sweep_last_pass().await
    }

    /// The age of the oldest transaction open in the database; `None` where
    /// the engine has none to watch (SQLite, memory).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn db_oldest_xact_age(&self) -> Result<Option<std::time::Duration>> {
        self.store().db_oldest_xact_age().await
    }

    /// The signals sent to an orchestration, oldest first.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn orchestration_signals(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Signal>> {
        self.store().orchestration_signal_list(tenant, id).await
    }
}
