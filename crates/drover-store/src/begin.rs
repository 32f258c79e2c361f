//! Opening a transaction so that a dropped caller cannot leave it open.
//!
//! sqlx 0.8 raises a connection's transaction depth only once `BEGIN`'s
//! reply has been read, and its drop guards roll back only when the depth
//! says a transaction is open. A future dropped in between (a caller's
//! `timeout`, a `select!`, an aborted request task) hands the connection
//! back to the pool inside a transaction nothing will end: on PostgreSQL the
//! session idles in transaction and the next borrower's statements run in
//! it (transact-rs/sqlx#4393). `drover-faults`' `tests/integration/cancel.rs` reproduces
//! it with a proxy that holds `BEGIN`'s reply.
//!
//! Invariant kept here: every transaction the PostgreSQL store opens is
//! opened by a task of its own, so the caller's cancellation never
//! interrupts the opening; a transaction opened for a caller that has gone
//! is rolled back at once. (PostgreSQL's connection does not expose the
//! server's transaction state to a pool hook; the SQLite store instead
//! checks SQLite's own state as the writer connection is released.)

use std::borrow::Cow;

use sqlx::{Database, Pool, Transaction};

use drover_core::error::{Error, Opaque, Result};

/// Opens a transaction on `pool` with `statement` (`BEGIN`, or `BEGIN`
/// followed by the settings the transaction runs under).
///
/// # Errors
/// The driver's error for the opening, as [`Error::Unavailable`] or
/// [`Error::Storage`]; [`Error::Unavailable`] when the runtime is shutting
/// down and the opening task was dropped.
///
/// # Cancel safety
/// Cancel safe: dropped at any point, the transaction is either never
/// opened or rolled back by the opening task.
pub(crate) async fn begin<DB: Database>(
    pool: &Pool<DB>,
    statement: impl Into<Cow<'static, str>>,
) -> Result<Transaction<'static, DB>> {
    let pool = pool.clone();
    let statement = statement.into();
    let (reply, opened) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let result = pool.begin_with(statement).await;
        if let Err(Ok(tx)) = reply.send(result) {
            // Nobody is waiting: end it now instead of leaving the rollback
            // queued on a pooled connection until its next use.
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "rolling back an abandoned transaction failed");
            }
        }
    });
    match opened.await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Error::Unavailable(Opaque::msg(
            "the task opening a transaction ended without an answer",
        ))),
    }
}
