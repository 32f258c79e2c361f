//! The paced vacuum: every worker reads the dead-tuple counts of the tables
//! in drover's own schema about once a second and runs `VACUUM` on a table
//! once its dead tuples pass a threshold, so the hot tables (`items` above
//! all: a claim, a completion and a purge each leave a dead row version)
//! stay small between autovacuum's visits (once per `autovacuum_naptime`,
//! 60 s by default, which at 800 items/s lets `items` saw-tooth to
//! ~130,000 dead tuples).
//!
//! This module owns the storage seam for it ([`VacuumStore`], a supertrait
//! of [`Store`](crate::Store)), what the seam reports ([`TableGarbage`],
//! [`TableVacuum`]) and the service ([`Vacuumer`], its [`VacuumConfig`]
//! and [`VacuumReport`]). Only PostgreSQL has garbage to collect: SQLite
//! reuses freed pages and memory frees rows at once, so on both
//! [`VacuumStore::table_garbage`] is empty and the worker does not start
//! the service.
//!
//! Invariants (the contract cases in `store/contract/vacuum.rs` and
//! `tests/postgres_vacuum.rs` check them):
//!
//! - **Never inside a transaction.** `VACUUM` cannot run in one; the store
//!   sends it alone over the simple query protocol on a plain pool
//!   connection, as the connecting login (the owner that migrated): no
//!   `SET ROLE`, no `BEGIN`. Pooler-safe: one statement, no session state.
//! - **Only drover's own tables.** The table name must be a table of the
//!   store's schema in the catalog, or the answer is
//!   [`Error::NotFound`](crate::Error::NotFound) and nothing is sent; the
//!   identifiers are quoted.
//! - **Never blocks writers, never waits.** `VACUUM (SKIP_LOCKED)` takes a
//!   lock claims and completions do not conflict with, and when it cannot
//!   have it at once (a second worker's concurrent pass of the same table,
//!   a DDL) it skips the table instead of queueing behind the holder.
//!   `TRUNCATE false` leaves out the one step that takes an exclusive
//!   lock (returning the table's empty tail to the system); autovacuum
//!   still does that.
//! - **A login that may not vacuum is told, once.** PostgreSQL only warns
//!   when a non-owner vacuums (and does nothing), so the store checks
//!   ownership first and answers [`Error::Forbidden`](crate::Error::Forbidden);
//!   the service logs it once and stops trying that table.
//! - **Does not spin when nothing can be reclaimed.** A vacuum that leaves a
//!   table's dead tuples (as read right after) not reduced by at least half
//!   — an old snapshot held open somewhere in the database keeps them
//!   visible — doubles that table's wait before the next vacuum, up to
//!   [`VacuumConfig::backoff_max`]; a vacuum that reclaims resets it. The
//!   service logs once when a table enters backoff, not on every tick.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Result;

mod as_service;
mod service;

pub use service::{
    VACUUM_BACKOFF_MAX_DEFAULT, VACUUM_CHECK_EVERY_DEFAULT, VACUUM_DEAD_RATIO_DEFAULT,
    VACUUM_DEAD_THRESHOLD_DEFAULT, VACUUM_JITTER, VACUUM_STRATEGY, VacuumConfig, VacuumOutcome,
    VacuumReport, Vacuumer, vacuum_role,
};

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
    /// [`Error::NotFound`](crate::Error::NotFound) when `table` is not a
    /// table of the store's schema (always, where the engine has no
    /// garbage); [`Error::Forbidden`](crate::Error::Forbidden) when the
    /// connecting login may not vacuum it (neither its owner nor the
    /// database's, nor a superuser); storage errors.
    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum>;
}
