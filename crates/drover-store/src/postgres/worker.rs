//! [`WorkerStore`] on PostgreSQL: the liveness rows, stamped on the
//! database clock, read and written under the system role (a documented
//! cross-tenant operation).

use std::time::Duration;

use async_trait::async_trait;

use super::{PgStore, ops};
use crate::{WorkerRow, WorkerStore};
use drover_core::error::Result;

#[async_trait]
impl WorkerStore for PgStore {
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        ops::worker_beat(self, row).await
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        ops::worker_list(self).await
    }

    async fn worker_purge(&self, older_than: Duration) -> Result<u64> {
        ops::worker_purge(self, older_than).await
    }
}
