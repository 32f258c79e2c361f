//! PostgreSQL behind a connection pooler (PgBouncer in transaction pooling
//! mode) and the direct connection for what needs a session. The options
//! live beside [`ConnectOptions`](super::ConnectOptions), outside the
//! PostgreSQL store, so the connect options are one type whatever the
//! backends built.
//!
//! In [`PoolMode::Transaction`] the pooler hands each *transaction* a
//! possibly different server connection, so nothing may outlive one:
//!
//! - no startup `options` (PgBouncer refuses unknown startup parameters) and
//!   no `extra_float_digits` (refused unless `ignore_startup_parameters`
//!   names it): every drover transaction sets its role, `search_path` and
//!   tenant with `SET LOCAL` anyway, and the hot-path statements carry the
//!   schema spliced in;
//! - no named prepared statements: sqlx 0.8 names every statement it
//!   prepares, cache or no cache (`statement_cache_capacity(0)` only stops
//!   it remembering them, and leaves them on the server, where the next
//!   client of that server connection collides with `sqlx_s_1`). The store
//!   marks every statement non-persistent, so sqlx uses the unnamed
//!   statement; and since sqlx parses and binds an unnamed statement in two
//!   round trips (a `Sync` between them, after which the pooler may switch
//!   server connections), every statement runs inside an explicit
//!   transaction, the two autocommit hot-path statements (claim, complete
//!   many) included;
//! - `LISTEN` and the migrator (session `search_path`, session advisory
//!   lock) need a session: they use the direct URL
//!   ([`PoolerOptions::direct_url`], `DROVER_DIRECT_DATABASE_URL`) when one
//!   is given. Without it the worker polls for work (one warning) and
//!   `migrate` is refused with the variable to set. The sweep needs no
//!   session: its lease is a row (`sweep_lease`), taken, renewed and
//!   released by fenced statements like any other;
//! - the system login (`ConnectOptions::system_url`) goes through the same
//!   pooler with the same rules: it runs only single statements and
//!   explicit transactions.
//!
//! In [`PoolMode::Session`] (a direct connection, or a session-pooling
//! PgBouncer) the store works as it always has: cached named statements,
//! the search path as a startup option, LISTEN and migrations on the pool's
//! connections (or the direct URL's, when given).

use drover_core::error::{Error, Result};

/// The variable naming the pooling mode: `none`/`session` or `transaction`.
pub const POOLER_VAR: &str = "DROVER_DATABASE_POOLER";
/// The variable naming the direct (not pooled) URL.
pub const DIRECT_URL_VAR: &str = "DROVER_DIRECT_DATABASE_URL";

/// How the database URL reaches PostgreSQL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PoolMode {
    /// Directly, or through a session-pooling pooler: a connection is a
    /// session for as long as drover holds it.
    #[default]
    Session,
    /// Through a transaction-pooling pooler (PgBouncer's
    /// `pool_mode = transaction`): only a transaction is a session.
    Transaction,
}

/// How the store reaches PostgreSQL for pooled and session work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolerOptions {
    /// The pooling mode of the main URL. Default [`PoolMode::Session`].
    pub mode: PoolMode,
    /// A URL straight to PostgreSQL (not through the pooler) for `LISTEN`
    /// and migrations. Default none.
    pub direct_url: Option<String>,
}

impl PoolerOptions {
    /// [`POOLER_VAR`] and [`DIRECT_URL_VAR`] over the defaults.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming [`POOLER_VAR`] for a value other than
    /// `none`, `session` or `transaction`.
    pub fn from_env() -> Result<Self> {
        let mode = match std::env::var(POOLER_VAR) {
            Err(_) => PoolMode::Session,
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "none" | "session" => PoolMode::Session,
                "transaction" => PoolMode::Transaction,
                other => {
                    return Err(Error::invalid(
                        POOLER_VAR,
                        format!("{other:?} is not none, session or transaction"),
                    ));
                }
            },
        };
        let direct_url = std::env::var(DIRECT_URL_VAR)
            .ok()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty());
        Ok(PoolerOptions { mode, direct_url })
    }
}
