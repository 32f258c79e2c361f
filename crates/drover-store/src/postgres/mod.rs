//! The PostgreSQL backend: production storage, shared by many worker
//! processes on many hosts.
//!
//! This module owns the connection pool, the schema, the embedded migrations
//! (`migrations/postgres`), the SQL (`sql/postgres/*.sql`, one query per file)
//! and the per-transaction role discipline. Invariants it keeps, beyond those
//! of the [`Store`] trait:
//!
//! - **Every query runs as one of the installation's two roles, chosen per
//!   transaction.** A per-tenant call opens `BEGIN; SET LOCAL ROLE
//!   <runtime role>; SET LOCAL drover.tenant_id = '<uuid>'` (one round trip),
//!   so row-level security scopes every statement to that tenant; the
//!   documented cross-tenant calls run under the system role. Nothing is ever
//!   `SET` session-wide on a pooled connection, so nothing leaks to the next
//!   user of the connection.
//! - **The roles belong to one installation** (database + schema; migration
//!   0005 names them, [`InstallationRoles`]), and the store learns their names
//!   from the schema's `drover_roles()` once, on first use.
//! - **The system operations go through the system pool**: the pool of
//!   [`PgOptions::system_url`]'s login when one is configured (a login granted
//!   only the system role), else the one pool. A runtime login granted only the
//!   runtime role then cannot reach another tenant's rows, nor `SET ROLE` to
//!   the system role.
//! - **Lane, kind and every other caller value are bound parameters.** The
//!   only text spliced into SQL is the schema name (validated against
//!   `[a-z_][a-z0-9_]{0,62}` at construction) and a tenant [`Uuid`] (whose
//!   display form is hex and dashes).
//! - **Every write after a claim is fenced in its own statement** on the
//!   claim token, `status = 'claimed'` and `lease_expires_at > now()`; leases
//!   come from the database clock.
//! - **Wake-ups are sent by PostgreSQL at commit** on every transition that
//!   makes work available now: a statement-level trigger on `items` issues
//!   one `NOTIFY drover_wake, '<schema>:<lane>#<txid>'` per distinct lane per
//!   inserting statement, and the release, operator retry, zero-delay defer
//!   or failure and the stale requeue (of items available at once) each
//!   call `pg_notify` in their own statement; a rolled-back transition wakes
//!   no one, and PostgreSQL folds a transaction's identical notifications
//!   into one. Same-process workers are also woken in process after each
//!   commit, without a nonce while the store LISTENs (the `NOTIFY` that
//!   follows carries the one every process shares). The store's own
//!   enqueues are the exception (migration 0053, `notifier`): their
//!   transactions tell the trigger to send nothing, and the notifier sends
//!   the lanes' `NOTIFY` after the commit, so concurrent enqueues do not
//!   commit one after another behind PostgreSQL's notify lock.

mod access;
mod audit;
mod child;
mod claim_gen;
mod connect;
use connect::open_pool;
mod events;
mod gathered;
pub use events::append_in as event_append_in;
mod closures;
mod fair_call;
mod fair_first;
mod fair_groups;
mod fair_limited;
mod fair_rounds;
mod fairness;
mod flow_gen;
mod handover;
mod item;
mod items;
mod lanes;
mod limits;
mod links;
mod notifier;
mod ops;
mod orchestration;
mod outbox;
mod parking;
mod projector;
mod rates;
mod reconcile;
mod rotate;
mod row;
mod runs;
mod schedule;
mod sql;
mod sweep;
mod tally;
mod throughput;
mod vacuum;
mod wake;
mod worker;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Executor, PgConnection, PgPool, Postgres, Row, Transaction};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{Backend, Store};
use drover_core::error::{Error, Result};
use drover_core::item::NewItem;
use drover_core::rules::RetryPolicy;

pub use crate::pooler::{DIRECT_URL_VAR, POOLER_VAR, PoolMode, PoolerOptions};
pub use items::insert_in;
/// The fair claim's lock-and-first-read statement and its transaction's
/// plan settings, for the plan tests (not an API).
#[doc(hidden)]
pub mod fair_plans {
    pub use super::fair_first::GENERIC_INDEX_PLANS;
    pub use super::fair_first::lock_first_read_sql;
}
pub use links::links_insert_in;
pub use ops::sqlx_lock_id as sqlx_migrate_lock_id;
pub use orchestration::start_in;
pub use outbox::outbox_insert_in;
pub use rotate::{CARRY_MAX as ITEMS_CARRY_MAX, child_width as items_child_width};
pub use tally::{
    TALLY_ONE_PASS_PAGES, TALLY_PASS_BUDGET, TALLY_SLICE_PAGES, TallyLimits as ItemsTallyLimits,
};

/// The schema drover's tables live in unless told otherwise.
pub const SCHEMA_DEFAULT: &str = super::SCHEMA_DEFAULT;
/// The most connections the pool opens unless told otherwise.
pub const MAX_CONNECTIONS_DEFAULT: u32 = super::POOL_SIZE_DEFAULT;
/// The channel wake-ups are sent on; payloads are `<schema>:<lane>#<txid>`
/// (the sending transaction's id, since migration 0022; `<schema>:<lane>`
/// before it).
pub const WAKE_CHANNEL: &str = "drover_wake";
/// The cluster-wide runtime role migrations before 0005 created, shared by
/// every installation on the cluster; since 0005 it holds no privilege on
/// an installation (see [`InstallationRoles`]).
pub const LEGACY_RUNTIME_ROLE: &str = "drover_runtime";
/// The cluster-wide system role migrations before 0005 created; since 0005
/// it holds no privilege on an installation.
pub const LEGACY_SYSTEM_ROLE: &str = "drover_system";

/// How long [`Store::wakeups`] waits for the listener's first LISTEN.
const LISTEN_READY_WAIT: Duration = Duration::from_secs(5);

/// How [`PgStore::connect`] sets up its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The schema holding drover's tables ([`SCHEMA_DEFAULT`]); must match
    /// `[a-z_][a-z0-9_]{0,62}`.
    pub schema: String,
    /// The pool's connection limit ([`MAX_CONNECTIONS_DEFAULT`]); the system
    /// pool, when there is one, has the same limit and opens connections only
    /// as the system operations need them.
    pub max_connections: u32,
    /// The login for the documented cross-tenant operations (claim, orphan
    /// failure, stale-tenant discovery, purge, counts, gauges, unscoped
    /// listing, the workers table), granted only the installation's system
    /// role. `None` (the default): the one login of the main URL runs them,
    /// so it must hold both roles (the owner that migrated does).
    pub system_url: Option<String>,
    /// The longest a call waits for a connection, connecting included
    /// ([`crate::DB_TIMEOUT_DEFAULT`]).
    pub acquire_timeout: Duration,
    /// Whether the URL goes through a transaction-pooling PgBouncer, and
    /// the direct URL for session work (see [`PoolerOptions`]). Default: a
    /// direct connection.
    pub pooler: PoolerOptions,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: SCHEMA_DEFAULT.to_owned(),
            max_connections: MAX_CONNECTIONS_DEFAULT,
            system_url: None,
            acquire_timeout: crate::DB_TIMEOUT_DEFAULT,
            pooler: PoolerOptions::default(),
        }
    }
}

/// The two roles of one installation (one schema of one database), as
/// migration 0005 creates them and the schema's `drover_roles()` answers.
///
/// Named `<base>_runtime` and `<base>_system` with `<base> = left(schema,
/// 42) || '_' || left(md5(database || '/' || schema), 12)`: at most 63
/// bytes, stable for the installation's life, and distinct for two schemas
/// of one database or one schema name in two databases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallationRoles {
    /// Sees only the tenant set for its transaction; what a runtime login is
    /// granted.
    pub runtime: String,
    /// Runs the documented cross-tenant operations; what a system login is
    /// granted.
    pub system: String,
}

/// Logins [`PgStore::grant_logins`] gives the installation's roles to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginGrants {
    /// Logins granted the runtime role only. Each must not hold the system
    /// role (that would defeat the split); use one login for both instead.
    pub runtime: Vec<String>,
    /// Logins granted the system role.
    pub system: Vec<String>,
}

/// The most connections the direct (session) pool opens: the listener and
/// a migration.
const DIRECT_MAX_CONNECTIONS: u32 = 2;

/// Checks a schema name before it is spliced into DDL and `search_path`.
/// The schema is this backend's own setting, so the check lives here, not
/// above the store: every PostgreSQL entry that takes a schema (the
/// connect options, the pools, and the functions on a caller's
/// connection) calls it.
///
/// # Errors
/// [`Error::InvalidInput`] on `schema` unless it matches `[a-z_][a-z0-9_]{0,62}`.
pub fn validate_schema(schema: &str) -> Result<()> {
    let bytes = schema.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|c| matches!(c, b'a'..=b'z' | b'_'));
    let rest_ok = bytes
        .iter()
        .skip(1)
        .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_'));
    if first_ok && rest_ok && bytes.len() <= 63 {
        Ok(())
    } else {
        Err(Error::invalid(
            "schema",
            "must be 1 to 63 characters of lowercase letters, digits and _, not starting with a digit",
        ))
    }
}

/// The PostgreSQL [`Store`].
///
/// Owns a pool whose connections start with `search_path` set to the schema
/// (and a second one for the system login, when configured) and a lazily
/// started listener for wake-ups. Dropping the store stops the listener.
#[derive(Debug)]
pub struct PgStore {
    pool: PgPool,
    /// The pool the system operations use: `pool` itself unless a system
    /// login was configured.
    system_pool: PgPool,
    schema: String,
    /// Read from the schema's `drover_roles()` on first use.
    roles: tokio::sync::OnceCell<InstallationRoles>,
    /// Whether the system login may become the system role, asked once: a
    /// `BEGIN; SET LOCAL ROLE …` that fails leaves its pooled connection in
    /// an aborted transaction nothing ends (sqlx counts no transaction it
    /// did not see open), so a login that may not is refused before any
    /// statement is sent.
    system_member: tokio::sync::OnceCell<bool>,
    wake: crate::wake::WakeBus,
    /// The lanes whose enqueues committed and await the notifier's NOTIFY.
    notify_pending: Arc<notifier::Pending>,
    listening: AtomicBool,
    shutdown: CancellationToken,
    /// The hot-path statements with the schema spliced in (validated), so
    /// they need no per-transaction search_path.
    claim_sql: claim_gen::ClaimSql,
    complete_many_sql: String,
    /// `item_complete_many_results.sql` with the schema filled in.
    complete_many_results_sql: String,
    /// The limits in force, as the last claim read them.
    limits: crate::limits::LimitCache,
    /// The groups with parked items, as this process last read them.
    parked: crate::parking::ParkedCache,
    /// The rates in force, as the last claim read them.
    rates: crate::rates::RateCache,
    /// The fair-share settings, as the last claim read them.
    fair: crate::fairness::FairCache,
    /// Per lane, whether its pending work is of several tenants.
    fair_verdicts: Arc<crate::fairness::TenantLists>,
    /// Per lane, the passes as this process last read or wrote them.
    fair_passes: Arc<crate::fairness::PassCache>,
    /// Becomes true once the listener's first LISTEN is in place.
    listen_ready: tokio::sync::watch::Sender<bool>,
    /// How the pool reaches PostgreSQL.
    mode: PoolMode,
    /// False behind a transaction pooler: statements are unnamed and run
    /// inside explicit transactions (see `pooler`).
    persistent: bool,
    /// Connections straight to PostgreSQL for LISTEN and migrations, when a
    /// direct URL was given.
    direct: Option<PgPool>,
    /// The tallies of large items children in progress across purge passes
    /// (`rotate.rs`), and how large a child must be to be tallied in slices.
    tallies: std::sync::Mutex<tally::Tallies>,
    /// The login's own connect options, without the schema drover starts
    /// its pool's sessions in: set when [`PgStore::connect`] put the schema
    /// on every connection, so a caller's or a projector's transaction can
    /// run with the login's own `search_path` (`connect.rs`).
    login: Option<PgConnectOptions>,
    /// That `search_path`, read once from a connection of `login`.
    login_search_path: tokio::sync::OnceCell<String>,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl PgStore {
    /// Connects a pool to `url` for `opts.schema` (and a second pool to
    /// `opts.system_url` when given). Does not migrate.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad schema name or URL (`url` or
    /// `system_url`), [`Error::Config`] for a zero pool size,
    /// [`Error::Unavailable`] when the server does not answer.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is written.
    pub async fn connect(url: &str, opts: PgOptions) -> Result<PgStore> {
        // The backend's own configuration: checked here, where it is used.
        validate_schema(&opts.schema)?;
        if opts.max_connections == 0 {
            return Err(Error::Config("max_connections must be at least 1".into()));
        }
        if opts.acquire_timeout.is_zero() {
            return Err(Error::Config(
                "the database timeout must be longer than zero".into(),
            ));
        }
        let direct = match &opts.pooler.direct_url {
            Some(direct_url) => {
                let direct = PgConnectOptions::from_str(direct_url).map_err(|_| {
                    Error::invalid(DIRECT_URL_VAR, "is not a PostgreSQL connection URL")
                })?;
                // Lazy: a worker without wake-ups or a migration to run opens none.
                Some(
                    PgPoolOptions::new()
                        .max_connections(DIRECT_MAX_CONNECTIONS)
                        .acquire_timeout(opts.acquire_timeout)
                        .connect_lazy_with(direct),
                )
            }
            None => None,
        };
        let pool = open_pool(url, "url", &opts).await?;
        // The system login goes through the same pooler as the main URL (it
        // runs only single statements and explicit transactions), so it
        // gets the same connect options.
        let system_pool = match &opts.system_url {
            Some(system_url) => Some(open_pool(system_url, "system_url", &opts).await?),
            None => None,
        };
        let mut store = PgStore::from_pools(pool, system_pool, &opts.schema)?;
        store.login = connect::login_options(url, &opts);
        store.mode = opts.pooler.mode;
        store.persistent = opts.pooler.mode == PoolMode::Session;
        store.direct = direct;
        Ok(store)
    }

    /// The pool for work that needs a session (LISTEN, migrations): the
    /// direct pool when configured, else the main pool unless it goes
    /// through a transaction pooler.
    fn session_pool(&self) -> Option<&PgPool> {
        match (&self.direct, self.mode) {
            (Some(direct), _) => Some(direct),
            (None, PoolMode::Session) => Some(&self.pool),
            (None, PoolMode::Transaction) => None,
        }
    }

    /// Wraps an existing pool, which runs both the per-tenant and the system
    /// operations. The pool's own `search_path` does not matter: every
    /// transaction drover opens sets it locally.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad schema name.
    pub fn from_pool(pool: PgPool, schema: &str) -> Result<PgStore> {
        PgStore::from_pools(pool, None, schema)
    }

    /// Wraps existing pools: `pool` for the per-tenant operations (a runtime
    /// login), `system_pool` for the documented cross-tenant ones (a system
    /// login; `None`: `pool` runs them too).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad schema name.
    pub fn from_pools(pool: PgPool, system_pool: Option<PgPool>, schema: &str) -> Result<PgStore> {
        // The backend's own configuration: checked here, where it is used.
        validate_schema(schema)?;
        Ok(PgStore {
            system_pool: system_pool.unwrap_or_else(|| pool.clone()),
            pool,
            roles: tokio::sync::OnceCell::new(),
            system_member: tokio::sync::OnceCell::new(),
            schema: schema.to_owned(),
            wake: crate::wake::WakeBus::new(),
            notify_pending: Arc::default(),
            listening: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            listen_ready: tokio::sync::watch::channel(false).0,
            claim_sql: claim_gen::ClaimSql::new(schema),
            complete_many_sql: sql::ITEM_COMPLETE_MANY.replace("{schema}", schema),
            complete_many_results_sql: sql::ITEM_COMPLETE_MANY_RESULTS.replace("{schema}", schema),
            limits: crate::limits::LimitCache::default(),
            parked: crate::parking::ParkedCache::default(),
            rates: crate::rates::RateCache::default(),
            fair: crate::fairness::FairCache::default(),
            fair_verdicts: Arc::default(),
            fair_passes: Arc::default(),
            mode: PoolMode::Session,
            persistent: true,
            direct: None,
            tallies: std::sync::Mutex::new(tally::Tallies::default()),
            login: None,
            login_search_path: tokio::sync::OnceCell::new(),
        })
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema holding drover's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The pool the documented cross-tenant operations use (the system
    /// login's, or [`PgStore::pool`] when none was configured).
    pub fn system_pool(&self) -> &PgPool {
        &self.system_pool
    }

    /// The installation's two roles, read from the schema's `drover_roles()`
    /// on first use and kept.
    ///
    /// # Errors
    /// [`Error::Config`] when the schema is not migrated (to 0005 or later);
    /// database errors otherwise. A failed read is tried again next call.
    pub async fn roles(&self) -> Result<&InstallationRoles> {
        self.roles
            .get_or_try_init(|| async {
                let sql = format!(
                    "SELECT runtime_role, system_role FROM \"{}\".drover_roles()",
                    self.schema
                );
                // No arguments: the simple protocol, nothing prepared, so it
                // is safe behind a transaction pooler without a transaction.
                let row: std::result::Result<PgRow, sqlx::Error> =
                    (&self.pool).fetch_one(sql.as_str()).await;
                match row {
                    Ok(row) => Ok(InstallationRoles {
                        runtime: row.try_get(0)?,
                        system: row.try_get(1)?,
                    }),
                    // undefined_function, invalid_schema_name.
                    Err(sqlx::Error::Database(e))
                        if matches!(e.code().as_deref(), Some("42883" | "3F000")) =>
                    {
                        Err(Error::Config(format!(
                            "schema {} has no drover roles: run `drover migrate` (migration 0005 names them)",
                            self.schema
                        )))
                    }
                    Err(e) => Err(e.into()),
                }
            })
            .await
    }

    /// Grants the installation's roles to existing logins, so a process can
    /// connect as a runtime login granted only the runtime role and a system
    /// login granted only the system role. Run by the owner that migrated
    /// (it holds the right to grant both). Idempotent.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `runtime_login` for a runtime login that
    /// holds the system role (nothing is granted then), or for an empty
    /// name; [`Error::Config`] when the schema is not migrated; database
    /// errors (a login that does not exist, an owner without the right to
    /// grant) otherwise.
    pub async fn grant_logins(&self, grants: &LoginGrants) -> Result<()> {
        let roles = self.roles().await?.clone();
        // Logins and roles are PostgreSQL's alone (no other backend has
        // them, and no caller above the store checks them): checked here.
        for login in grants.runtime.iter().chain(&grants.system) {
            if login.is_empty() {
                return Err(Error::invalid("login", "must not be empty"));
            }
        }
        // One explicit transaction: the grants land together, and behind a
        // transaction pooler the unnamed check stays on one server connection.
        let mut tx = super::begin::begin(&self.pool, "BEGIN").await?;
        for login in &grants.runtime {
            let holds: Option<bool> = sqlx::query_scalar(
                "SELECT pg_has_role(r.oid, $2, 'MEMBER') FROM pg_roles r WHERE r.rolname = $1",
            )
            .persistent(self.persistent)
            .bind(login)
            .bind(&roles.system)
            .fetch_optional(&mut *tx)
            .await?;
            if holds == Some(true) && !grants.system.contains(login) {
                return Err(Error::invalid(
                    "runtime_login",
                    format!(
                        "{login} holds the system role {}: a runtime login must not \
                         (revoke it, or run with one login for both)",
                        roles.system
                    ),
                ));
            }
        }
        for (logins, role) in [
            (&grants.runtime, &roles.runtime),
            (&grants.system, &roles.system),
        ] {
            for login in logins {
                let sql = format!("GRANT {} TO {}", quote_ident(role), quote_ident(login));
                tx.execute(sql.as_str()).await?;
                tracing::info!(%login, %role, "granted");
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Opens a transaction as the runtime role scoped to `tenant`, in one
    /// round trip. The settings end with the transaction.
    async fn begin_tenant(&self, tenant: Uuid) -> Result<Transaction<'static, Postgres>> {
        self.begin_tenant_with(tenant, "").await
    }

    /// [`Self::begin_tenant`] with more settings for the transaction in the
    /// same round trip: `extra` is a fixed `SET LOCAL …;` string of the
    /// caller's (never user input).
    async fn begin_tenant_with(
        &self,
        tenant: Uuid,
        extra: &'static str,
    ) -> Result<Transaction<'static, Postgres>> {
        let roles = self.roles().await?;
        // Every spliced value is safe: the role is quoted, the schema is
        // validated, a Uuid displays as hex and dashes.
        let sql = format!(
            "BEGIN; SET LOCAL ROLE {}; SET LOCAL search_path TO \"{}\"; \
             SET LOCAL drover.tenant_id = '{tenant}'; {extra}",
            quote_ident(&roles.runtime),
            self.schema
        );
        super::begin::begin(&self.pool, sql).await
    }

    /// Opens a transaction as the system role, on the system pool, for a
    /// documented cross-tenant operation.
    async fn begin_system(&self) -> Result<Transaction<'static, Postgres>> {
        let sql = self.system_begin_sql().await?;
        super::begin::begin(&self.system_pool, sql).await
    }

    /// The statement that opens a system-role transaction on the system
    /// pool (`begin_system`), once this login is known to hold the role.
    async fn system_begin_sql(&self) -> Result<String> {
        let roles = self.roles().await?;
        let member = *self
            .system_member
            .get_or_try_init(|| async {
                // The simple protocol, outside any transaction: pooler-safe.
                let sql = format!(
                    "SELECT pg_has_role(current_user, '{}', 'MEMBER')",
                    roles.system.replace('\'', "''")
                );
                let row = (&self.system_pool).fetch_one(sql.as_str()).await?;
                Ok::<bool, Error>(row.try_get(0)?)
            })
            .await?;
        if !member {
            return Err(Error::Forbidden(format!(
                "permission denied: this login may not act as the system role {} \
                 (cross-tenant work needs a system login: DROVER_SYSTEM_DATABASE_URL)",
                roles.system
            )));
        }
        Ok(format!(
            "BEGIN; SET LOCAL ROLE {}; SET LOCAL search_path TO \"{}\"",
            quote_ident(&roles.system),
            self.schema
        ))
    }

    /// Wakes same-process subscribers for `lane` (the NOTIFY reaches other
    /// processes). Having no subscriber is normal.
    ///
    /// Where the store can LISTEN, the wake-up goes without a nonce: the
    /// transaction's own `NOTIFY` follows with its id, which every process
    /// hears alike, and a counted nonce here would let this process's
    /// workers disagree with the others' on who claims at once. Without
    /// LISTEN (a transaction pooler and no direct URL) this is the only
    /// wake-up there is, so it carries this store's count.
    fn wake_local(&self, lane: &str) {
        self.fair_verdicts.touch();
        if self.session_pool().is_some() {
            self.wake.hint(lane);
        } else {
            self.wake.counted(lane);
        }
    }
}

/// Drops an installation: `schema` with everything in it, then its two roles
/// (which would otherwise outlive it, being cluster-wide). For sandboxes and
/// tests; run by the owner or a superuser. A schema that never reached
/// migration 0005 just loses its tables.
///
/// # Errors
/// [`Error::InvalidInput`] for a bad schema name; database errors.
pub async fn drop_installation(conn: &mut PgConnection, schema: &str) -> Result<()> {
    // A PostgreSQL-only entry: its schema is spliced into SQL text.
    validate_schema(schema)?;
    let migrated: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = $1 AND p.proname = 'drover_roles')",
    )
    .bind(schema)
    .fetch_one(&mut *conn)
    .await?;
    let roles = if migrated {
        let sql = format!("SELECT runtime_role, system_role FROM \"{schema}\".drover_roles()");
        Some(
            sqlx::query_as::<_, (String, String)>(&sql)
                .fetch_one(&mut *conn)
                .await?,
        )
    } else {
        None
    };
    conn.execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str())
        .await?;
    for role in roles.iter().flat_map(|(r, s)| [r, s]) {
        // Memberships go with the role; its privileges went with the schema.
        conn.execute(format!("DROP ROLE IF EXISTS {}", quote_ident(role)).as_str())
            .await?;
    }
    Ok(())
}

/// An identifier quoted for splicing into SQL (PostgreSQL's `quote_ident`
/// rule: double quotes, inner ones doubled).
/// Whether `e` is PostgreSQL's undefined_table (42P01): a statement on a
/// table of a migration this database has not run yet (a binary ahead of
/// its database until `drover migrate`), which readers take as "none".
fn undefined_table(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some("42P01"))
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Switches the tenant of an open runtime-role transaction.
async fn switch_tenant(conn: &mut PgConnection, tenant: Uuid) -> Result<()> {
    let sql = format!("SET LOCAL drover.tenant_id = '{tenant}'");
    // A query without arguments goes over the simple protocol: not prepared.
    conn.execute(sql.as_str()).await?;
    Ok(())
}

/// A duration as the float seconds `make_interval(secs => …)` takes.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The largest exponent the stale requeue's `power(factor, attempts)` needs:
/// past it the delay is at the cap anyway, and bounding it keeps `power()`
/// from overflowing `float8` (an error in PostgreSQL) for huge budgets.
/// Twin of the `min(1000)` guard in [`RetryPolicy::nominal_delay`].
fn exponent_cap(policy: &RetryPolicy) -> i32 {
    let base = policy.base.as_secs_f64();
    let cap = policy.cap.as_secs_f64();
    let factor = policy.factor;
    if factor > 1.0 && base > 0.0 {
        let needed = ((cap / base).ln() / factor.ln()).ceil();
        if needed.is_finite() {
            return (needed.max(0.0) as i32).saturating_add(1).min(1000);
        }
    }
    1000
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn item_insert_each_claimed<'a>(
        &'a self,
        claims: &[Option<crate::access::MarkerClaim>],
        prepared: Vec<Result<NewItem>>,
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<Box<dyn crate::gathered::Gathered + 'a>> {
        self.fair_verdicts.touch();
        if prepared
            .iter()
            .any(|p| p.as_ref().is_ok_and(NewItem::is_linked))
        {
            // A linked item is its own all-or-nothing enqueue (its links'
            // statements and refusals): claim, then insert one by one.
            return crate::gathered::write_in_steps(self, claims, prepared, retention, stale_after)
                .await;
        }
        gathered::write(self, claims, prepared, retention, stale_after).await
    }

    fn pool_size(&self) -> Option<u32> {
        Some(self.pool.options().get_max_connections())
    }

    fn pg_schema(&self) -> Option<&str> {
        Some(&self.schema)
    }

    fn wake(&self, lane: &str) {
        self.wake_local(lane);
    }

    async fn tx_begin(&self) -> Result<crate::Tx> {
        let tx = self.begin_as_login().await?;
        Ok(crate::Tx::from_postgres(tx, self.persistent))
    }

    async fn db_now(&self) -> Result<DateTime<Utc>> {
        schedule::db_now(self).await
    }

    async fn migrate(&self) -> Result<()> {
        ops::migrate(self).await
    }

    async fn migration_status(&self) -> Result<crate::MigrationStatus> {
        ops::migration_status(self).await
    }

    async fn db_oldest_xact_age(&self) -> Result<Option<Duration>> {
        use sqlx::Row;
        // The simple protocol: nothing prepared, pooler-safe.
        let row = self.pool.fetch_one(sql::DB_OLDEST_XACT_AGE).await?;
        let age: f64 = row.try_get("age")?;
        Ok(Some(Duration::from_secs_f64(age.max(0.0))))
    }

    async fn wakeups(&self) -> Result<broadcast::Receiver<crate::Wake>> {
        // Subscribe before starting the listener so no forwarded lane is missed.
        let rx = self.wake.subscribe();
        let Some(session) = self.session_pool() else {
            if !self.listening.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    "the database URL goes through a transaction pooler and {} is not set: \
                     no LISTEN, workers poll for work (every poll interval)",
                    DIRECT_URL_VAR
                );
            }
            return Ok(rx);
        };
        if !self.listening.swap(true, Ordering::AcqRel) {
            wake::spawn_listener(
                session.clone(),
                self.schema.clone(),
                self.wake.clone(),
                self.shutdown.clone(),
                self.listen_ready.clone(),
                Arc::clone(&self.notify_pending),
            );
        }
        // Return once LISTEN is in place, so a commit right after this call
        // is heard; bounded, because a server that is down must not stop a
        // worker from starting (it polls meanwhile).
        let mut ready = self.listen_ready.subscribe();
        let _ = tokio::time::timeout(LISTEN_READY_WAIT, ready.wait_for(|r| *r)).await;
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        for ok in ["drover", "_x", "drover_t_0123abc", &"a".repeat(63)] {
            assert!(validate_schema(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1x", "Drover", "a-b", "a\"b", "a b", &"a".repeat(64)] {
            assert!(validate_schema(bad).is_err(), "{bad}");
        }
    }

    /// The SQL twin of `nominal_delay`: `least(cap, base * factor ^
    /// least(attempts_before, exponent_cap))`, evaluated here in f64.
    fn sql_nominal(p: &RetryPolicy, attempts_after: i32) -> f64 {
        let before = attempts_after - 1;
        let e = before.min(exponent_cap(p));
        (p.base.as_secs_f64() * p.factor.powi(e)).min(p.cap.as_secs_f64())
    }

    #[test]
    fn exponent_cap_keeps_the_nominal_delay() {
        let policies = [
            RetryPolicy::default(),
            RetryPolicy {
                factor: 10.0,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                factor: 1.0,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                base: Duration::from_millis(10),
                cap: Duration::from_secs(86_400),
                ..RetryPolicy::default()
            },
        ];
        for p in &policies {
            for a in [1, 2, 3, 5, 10, 20, 40, 100, 5000, i32::MAX] {
                let want = p.nominal_delay(a).as_secs_f64();
                let got = sql_nominal(p, a);
                assert!(
                    (want - got).abs() < 1e-6,
                    "{p:?} attempts {a}: {want} vs {got}"
                );
                assert!(got.is_finite());
            }
        }
    }
}
