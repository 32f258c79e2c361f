//! The store's seam for a caller's own transaction: writes that land on a
//! connection the caller opened (and commits or rolls back), so they exist
//! if and only if the caller's write commits.
//!
//! The queue hands the caller's connection over as a [`CallerTx`] and calls
//! [`Store::item_insert_in`], [`Store::orchestration_insert_in`] or
//! [`Store::outbox_insert_in`]; only this module names the backends'
//! caller-transaction functions, so there is one path from a caller's
//! transaction to a backend, beside the store's own transactions.
//!
//! Invariant: a connection of one engine given to a store of another is
//! refused with [`Error::Config`](drover_core::Error::Config) before anything is
//! written (a PostgreSQL store is told by its schema, a SQLite store by its
//! engine).

// Without a backend every caller-transaction method diverges on the
// never-built variant, so its arguments go unused.
#![cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_variables)
)]

#[cfg(feature = "postgres")]
use sqlx::PgConnection;
#[cfg(feature = "sqlite")]
use sqlx::SqliteConnection;

use super::Store;
use crate::orchestration::{NewOrchestration, OrchestrationInserted};
use crate::outbox::NewOutboxRow;
use drover_core::error::Result;
use drover_core::item::{Inserted, NewItem};

/// A caller's connection, inside the caller's transaction, as the store's
/// caller-transaction methods take it.
#[non_exhaustive]
pub enum CallerTx<'c> {
    /// A PostgreSQL connection (for a store on PostgreSQL).
    #[cfg(feature = "postgres")]
    Postgres(&'c mut PgConnection),
    /// A SQLite connection (for a store on SQLite).
    #[cfg(feature = "sqlite")]
    Sqlite(&'c mut SqliteConnection),
    /// Never built: keeps the lifetime used in a build without backends.
    #[doc(hidden)]
    _Never(std::convert::Infallible, std::marker::PhantomData<&'c ()>),
}

impl std::fmt::Debug for CallerTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The never-built variant names no engine rather than diverging, so
        // a build without backends has no unreachable code here.
        let engine = match self {
            #[cfg(feature = "postgres")]
            CallerTx::Postgres(_) => "Postgres",
            #[cfg(feature = "sqlite")]
            CallerTx::Sqlite(_) => "Sqlite",
            CallerTx::_Never(..) => "none",
        };
        f.debug_tuple("CallerTx").field(&engine).finish()
    }
}

/// The PostgreSQL schema of `store`, or the refusal of a PostgreSQL
/// connection given to a store that is not on PostgreSQL.
#[cfg(feature = "postgres")]
fn pg_schema<S: Store + ?Sized>(store: &S) -> Result<&str> {
    store.pg_schema().ok_or_else(|| {
        drover_core::Error::Config(
            "a PostgreSQL connection was given to a queue that is not on PostgreSQL".into(),
        )
    })
}

/// Refuses a SQLite connection given to a store that is not on SQLite.
#[cfg(feature = "sqlite")]
fn check_sqlite<S: Store + ?Sized>(store: &S) -> Result<()> {
    if store.backend() != super::Backend::Sqlite {
        return Err(drover_core::Error::Config(
            "a SQLite connection was given to a queue that is not on SQLite".into(),
        ));
    }
    Ok(())
}

/// [`Store::item_insert_in`]'s default: the backend's own insert on the
/// caller's connection.
pub(super) async fn item_insert_in<S: Store + ?Sized>(
    store: &S,
    conn: CallerTx<'_>,
    item: &NewItem,
) -> Result<Inserted> {
    match conn {
        #[cfg(feature = "postgres")]
        CallerTx::Postgres(c) => super::postgres::insert_in(c, pg_schema(store)?, item).await,
        #[cfg(feature = "sqlite")]
        CallerTx::Sqlite(c) => {
            check_sqlite(store)?;
            super::sqlite::insert_in(c, item, store.now()).await
        }
        CallerTx::_Never(never, _) => match never {},
    }
}

/// [`Store::links_insert_in`]'s default: the backend's linked insert on the
/// caller's connection.
pub(super) async fn links_insert_in<S: Store + ?Sized>(
    store: &S,
    conn: CallerTx<'_>,
    items: &[NewItem],
) -> Result<Vec<Inserted>> {
    match conn {
        #[cfg(feature = "postgres")]
        CallerTx::Postgres(c) => {
            super::postgres::links_insert_in(c, pg_schema(store)?, items).await
        }
        #[cfg(feature = "sqlite")]
        CallerTx::Sqlite(c) => {
            check_sqlite(store)?;
            super::sqlite::links_insert_in(c, items, store.now()).await
        }
        CallerTx::_Never(never, _) => match never {},
    }
}

/// [`Store::orchestration_insert_in`]'s default: the backend's own start
/// on the caller's connection.
pub(super) async fn orchestration_insert_in<S: Store + ?Sized>(
    store: &S,
    conn: CallerTx<'_>,
    new: &NewOrchestration,
    first: &NewItem,
) -> Result<OrchestrationInserted> {
    match conn {
        #[cfg(feature = "postgres")]
        CallerTx::Postgres(c) => super::postgres::start_in(c, pg_schema(store)?, new, first).await,
        #[cfg(feature = "sqlite")]
        CallerTx::Sqlite(c) => {
            check_sqlite(store)?;
            super::sqlite::start_in(c, new, first, store.now()).await
        }
        CallerTx::_Never(never, _) => match never {},
    }
}

/// [`Store::outbox_insert_in`]'s default: the backend's own outbox write on
/// the caller's connection.
pub(super) async fn outbox_insert_in<S: Store + ?Sized>(
    store: &S,
    conn: CallerTx<'_>,
    row: &NewOutboxRow,
) -> Result<()> {
    match conn {
        #[cfg(feature = "postgres")]
        CallerTx::Postgres(c) => super::postgres::outbox_insert_in(c, pg_schema(store)?, row).await,
        #[cfg(feature = "sqlite")]
        CallerTx::Sqlite(c) => {
            check_sqlite(store)?;
            super::sqlite::outbox_insert_in(c, row, store.now()).await
        }
        CallerTx::_Never(never, _) => match never {},
    }
}
