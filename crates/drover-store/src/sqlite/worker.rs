//! [`WorkerStore`] on SQLite: the liveness rows, stamped on the store's
//! clock (the file is shared by the processes of one host, so one clock).

use std::time::Duration;

use async_trait::async_trait;

use super::SqliteStore;
use crate::{WorkerRow, WorkerStore};
use drover_core::error::Result;

#[async_trait]
impl WorkerStore for SqliteStore {
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        self.beat(row).await
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        self.read_workers().await
    }

    async fn worker_purge(&self, older_than: Duration) -> Result<u64> {
        self.purge_workers(older_than).await
    }
}
