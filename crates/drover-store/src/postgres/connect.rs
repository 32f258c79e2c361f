//! Opening the store's pools: the connect options per pooling mode, the
//! pool's bounded acquire and idle ping, and a connect error turned into
//! the setting that fixes it where the server's own words would not say;
//! and the transactions that run a caller's statements as the login
//! ([`PgStore::begin_as_login`]).
//!
//! Invariants: in [`PoolMode::Session`] every connection carries the schema
//! as its `search_path` startup option; in [`PoolMode::Transaction`] no
//! startup parameter beyond the login's is sent and no statement is named.
//! A transaction opened for a caller (`Store::tx_begin`) or a projector's
//! `apply` runs with the `search_path` the login has on a connection of its
//! own, so the caller's unqualified table names resolve as on the caller's
//! own pool; drover's statements inside it set the schema for themselves
//! (`items::enter_caller_tx`) and put the caller's back.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};

use super::{PgOptions, PgStore};
use crate::pooler::{DIRECT_URL_VAR, POOLER_VAR, PoolMode};
use drover_core::error::{Error, Result};

/// Opens a pool to `url` (named `field` in errors) with `search_path` set to
/// the schema on every connection.
pub(super) async fn open_pool(url: &str, field: &'static str, opts: &PgOptions) -> Result<PgPool> {
    // The URL is this backend's own configuration: only it can parse it.
    let connect = PgConnectOptions::from_str(url)
        .map_err(|_| Error::invalid(field, "is not a PostgreSQL connection URL"))?;
    let connect = match opts.pooler.mode {
        // A startup parameter rather than an after-connect SET: same
        // effect on every pooled connection, no extra round trip.
        PoolMode::Session => connect.options([("search_path", opts.schema.as_str())]),
        // PgBouncer refuses both startup parameters; every transaction
        // sets its search_path locally anyway. No statement is named
        // (each query is non-persistent), so the cache stays empty.
        PoolMode::Transaction => connect.extra_float_digits(None).statement_cache_capacity(0),
    };
    PgPoolOptions::new()
        .max_connections(opts.max_connections)
        // Bounds every acquire, a new connection's handshake included: with
        // the server down a call fails after this instead of waiting out the
        // outage (sqlx's default is 30 s).
        .acquire_timeout(opts.acquire_timeout)
        // A ping before a checkout only for a connection that sat idle
        // (sqlx's default pings before every checkout: a round trip in front
        // of every claim, completion and request). A restart breaks every
        // pooled connection, and the one that sat out the outage is pinged,
        // found dead and replaced, so a caller's one-off call (an enqueue
        // from a web request) gets a fresh connection instead of the error.
        // A busy pool hands connections back within milliseconds and skips
        // the ping; no restart is that short.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < PING_IF_IDLE_FOR {
                    return Ok(true);
                }
                // A failed ping discards the connection; the pool opens a
                // new one for this acquire.
                Ok(sqlx::Connection::ping(conn).await.is_ok())
            })
        })
        .connect_with(connect)
        .await
        .map_err(|e| explain_refusal(e, field, opts.pooler.mode))
}

/// A connect error, with the setting that fixes it when the server refused
/// a startup parameter: in session mode drover sends `options` (the
/// search path) and `extra_float_digits`, and a transaction-pooling
/// PgBouncer refuses both ("unsupported startup parameter"), which alone
/// leaves a user with PgBouncer's words and no hint that drover has a
/// mode for it.
fn explain_refusal(e: sqlx::Error, field: &'static str, mode: PoolMode) -> Error {
    let said = e.to_string();
    if mode == PoolMode::Session && said.contains("unsupported startup parameter") {
        return Error::Config(format!(
            "{field}: the server refused a startup parameter ({said}); this is what a \
             transaction-pooling PgBouncer answers. Set {}=transaction (and {} to a URL \
             straight to PostgreSQL for LISTEN and migrations), or connect directly",
            POOLER_VAR, DIRECT_URL_VAR,
        ));
    }
    e.into()
}

/// How long a pooled connection may sit idle before its next checkout
/// pings it first: shorter than any server restart, longer than a busy
/// pool's turnaround.
const PING_IF_IDLE_FOR: std::time::Duration = std::time::Duration::from_millis(50);

/// The login's own connect options for `url`, when the store's pool starts
/// its sessions in the schema (session mode) and so hides the login's own
/// `search_path`; `None` otherwise (through a transaction pooler nothing is
/// added to the login's sessions).
pub(super) fn login_options(url: &str, opts: &PgOptions) -> Option<PgConnectOptions> {
    match opts.pooler.mode {
        PoolMode::Session => PgConnectOptions::from_str(url).ok(),
        PoolMode::Transaction => None,
    }
}

impl PgStore {
    /// Opens a transaction on the store's pool as its login, with the
    /// login's own `search_path` (read once, from a connection of its own,
    /// when the pool's sessions start in the schema): the transaction a
    /// caller's statements run in (`Store::tx_begin`) and a projector's.
    ///
    /// # Errors
    /// The database's, for the read or the opening.
    ///
    /// # Cancel safety
    /// Cancel safe, as `begin::begin`.
    pub(super) async fn begin_as_login(&self) -> Result<Transaction<'static, Postgres>> {
        let Some(login) = &self.login else {
            return crate::begin::begin(&self.pool, "BEGIN").await;
        };
        let path = self
            .login_search_path
            .get_or_try_init(|| async {
                let mut conn = PgConnection::connect_with(login).await?;
                let path: String = sqlx::query_scalar("SELECT current_setting('search_path')")
                    .persistent(false)
                    .fetch_one(&mut conn)
                    .await?;
                if let Err(e) = conn.close().await {
                    tracing::debug!(error = %e, "closing the search_path probe failed");
                }
                Ok::<String, Error>(path)
            })
            .await?;
        // The server's own rendering of the setting, passed back as an
        // escape string literal (quotes and backslashes doubled, whatever
        // standard_conforming_strings says): nothing of it is parsed as SQL.
        let sql = format!(
            "BEGIN; SELECT set_config('search_path', E'{}', true)",
            path.replace('\\', "\\\\").replace('\'', "''")
        );
        crate::begin::begin(&self.pool, sql).await
    }
}
