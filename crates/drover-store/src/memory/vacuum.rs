//! [`VacuumStore`] in memory: nothing to collect. A row removed from the
//! store's maps is freed at once, and an update replaces the row in place,
//! so there are no dead row versions to count or vacuum.

use async_trait::async_trait;

use super::MemoryStore;
use crate::vacuum::{TableGarbage, TableVacuum, VacuumStore};
use drover_core::error::{Error, Result};

#[async_trait]
impl VacuumStore for MemoryStore {
    /// Always empty: memory leaves no garbage.
    async fn table_garbage(&self) -> Result<Vec<TableGarbage>> {
        Ok(Vec::new())
    }

    /// Always [`Error::NotFound`]: the memory store has no tables to vacuum.
    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum> {
        Err(Error::NotFound(format!(
            "no table {table:?} to vacuum: the memory store leaves no garbage"
        )))
    }
}
