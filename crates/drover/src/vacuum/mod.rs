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
//! `tests/integration/postgres_vacuum.rs` check them):
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

mod as_service;
mod service;

pub(crate) use as_service::VacuumKnobs;

pub use service::{
    VACUUM_BACKOFF_MAX_DEFAULT, VACUUM_CHECK_EVERY_DEFAULT, VACUUM_DEAD_RATIO_DEFAULT,
    VACUUM_DEAD_THRESHOLD_DEFAULT, VACUUM_JITTER, VACUUM_STRATEGY, VacuumConfig, VacuumOutcome,
    VacuumReport, Vacuumer, vacuum_role,
};

pub use crate::store::vacuum::{TableGarbage, TableVacuum, VacuumStore};
