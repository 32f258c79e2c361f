//! The paced vacuum's storage vocabulary: the [`VacuumStore`] seam (a
//! supertrait of [`Store`](crate::Store)) and what it reports
//! ([`TableGarbage`], [`TableVacuum`]). The service that paces it lives in
//! `crate::vacuum` (which re-exports these under their old paths); the
//! invariants each backend keeps are stated there and checked by the
//! contract cases in `store/contract/vacuum.rs`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use drover_core::error::Result;

/// One table's garbage as the database's statistics last saw it
/// (`pg_stat_user_tables` on PostgreSQL: counts flushed by each backend
/// about once a second, so they trail the writes slightly).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableGarbage {
    /// The table's name in drover's schema (unqualified).
    pub table: String,
    /// Live rows, estimated (`n_live_tup`).
    pub live: u64,
    /// Dead row versions not yet vacuumed, estimated (`n_dead_tup`).
    pub dead: u64,
    /// When the table was last vacuumed, by anyone (the later of
    /// `last_vacuum` and `last_autovacuum`); `None` if never.
    pub last_vacuum: Option<DateTime<Utc>>,
}

/// What one [`VacuumStore::table_vacuum`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableVacuum {
    /// True when a vacuum of the table completed between the call's check
    /// and its read after: this one, or another's whose lock made this one
    /// skip the table. False when `SKIP_LOCKED` skipped it and nobody
    /// vacuumed it meanwhile (its lock was held: another's vacuum still
    /// running, a DDL).
    pub vacuumed: bool,
    /// The table's garbage as read right after the vacuum.
    pub after: TableGarbage,
}

/// The paced vacuum's seam (system operations on the store's own tables).
/// A supertrait of [`Store`](crate::Store).
#[async_trait]
pub trait VacuumStore: Send + Sync {
    /// The garbage of every table in the store's schema, sorted by table
    /// name. Empty where the engine has no garbage to collect (SQLite
    /// reuses freed pages; memory frees rows at once).
    ///
    /// # Errors
    /// Storage errors only.
    async fn table_garbage(&self) -> Result<Vec<TableGarbage>>;

    /// Vacuums `table` of the store's schema without waiting for its lock
    /// (`VACUUM (SKIP_LOCKED)` on PostgreSQL, outside any transaction, as
    /// the connecting login), then reads its garbage again.
    ///
    /// # Errors
    /// [`Error::NotFound`](drover_core::Error::NotFound) when `table` is not a
    /// table of the store's schema (always, where the engine has no
    /// garbage); [`Error::Forbidden`](drover_core::Error::Forbidden) when the
    /// connecting login may not vacuum it (neither its owner nor the
    /// database's, nor a superuser); storage errors.
    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum>;
}
