//! [`VacuumStore`] on SQLite: nothing for the paced vacuum to do. SQLite
//! keeps no dead row versions to reclaim: a deleted or updated row's space
//! goes to the file's free pages at commit and is reused by the next
//! writes, so there is no garbage to count. (`VACUUM` in SQLite rewrites
//! the whole file under the one write lock, which would stall every claim:
//! never something to run once a second.)

use async_trait::async_trait;

use super::SqliteStore;
use crate::vacuum::{TableGarbage, TableVacuum, VacuumStore};
use drover_core::error::{Error, Result};

#[async_trait]
impl VacuumStore for SqliteStore {
    /// Always empty: SQLite reuses freed pages.
    async fn table_garbage(&self) -> Result<Vec<TableGarbage>> {
        Ok(Vec::new())
    }

    /// Always [`Error::NotFound`]: no table of a SQLite store is vacuumed
    /// by the paced vacuum.
    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum> {
        Err(Error::NotFound(format!(
            "no table {table:?} to vacuum: SQLite reuses freed pages, so the paced vacuum has \
             nothing to do"
        )))
    }
}
