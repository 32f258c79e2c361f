//! The storage seam: one [`Store`] every backend implements, made of one
//! trait per entity ([`ItemStore`], [`AuditStore`], [`WorkerStore`],
//! [`SweepStore`], and each capability's own, such as
//! [`ScheduleStore`](schedule::ScheduleStore) and
//! [`VacuumStore`](vacuum::VacuumStore)), methods named
//! entity-then-verb (`item_claim`, `item_complete`, `worker_beat`). `Store`
//! itself keeps what belongs to the store as a whole: its engine, clock,
//! migrations and wake-ups.
//!
//! Invariants every implementation keeps (the contract suite in
//! `contract` (feature `test-util`) checks each against every backend):
//!
//! - An insert never overwrites; a collision changes nothing and reports which
//!   key collided (`IdExists` before `KeyExists`).
//! - **A cross-tenant id collision reveals nothing** (one rule on the single,
//!   bulk and transactional paths of every backend): the inserting tenant's
//!   own item with the id answers `IdExists`, else its own item with the key
//!   answers `KeyExists` (each with that own item); only when neither exists
//!   and the id is held by another tenant's item does the insert answer
//!   [`Error::Conflict`](drover_core::Error::Conflict) (single, transactional) or
//!   [`InsertResult::IdTaken`](drover_core::item::InsertResult::IdTaken) for that row (bulk), never that item or any
//!   field of it. The own key wins over a foreign id so that the answer to a
//!   keyed retry does not depend on what another tenant holds.
//! - A claim hands each item to exactly one claimer, stamps a fresh random
//!   token, increments `claim_seq`, and sets the lease from the store's clock
//!   (the database clock on PostgreSQL).
//! - Every write after a claim is conditioned, in one statement, on the token,
//!   on `status = 'claimed'` and on the lease not having passed; otherwise it
//!   changes nothing and returns [`Error::Conflict`](drover_core::Error::Conflict).
//! - Every per-tenant call reads and writes only that tenant's rows. The
//!   cross-tenant calls (`item_claim`, `item_fail_orphaned`,
//!   `item_stale_tenants`, `item_purge`, `gauges`, `counts`, `counts_lane`, `item_list`
//!   without
//!   a tenant, the workers table and the sweep lease) are the system
//!   operations: on PostgreSQL they run under the installation's system
//!   role (on the system login's pool when [`ConnectOptions::system_url`]
//!   names one), every other call under its runtime role with the tenant
//!   set for its transaction only.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use drover_core::error::Result;
use drover_core::item::{Inserted, NewItem};

pub mod access;
mod audit;
#[cfg(feature = "postgres")]
mod begin;
mod caller;
pub mod clock;
pub mod closures;
pub mod events;
pub mod fairness;
pub mod gathered;
mod item;
pub mod lane;
pub mod limits;
pub mod links;
pub mod memory;
mod migrations;
pub mod orchestration;
pub mod outbox;
pub mod parking;
pub mod pooler;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod projector;
pub mod rates;
pub mod reconcile;
pub mod runs;
pub mod schedule;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod sweep;
pub mod throughput;
pub mod tx;
pub mod vacuum;
pub mod wake;
mod worker;

#[cfg(feature = "test-util")]
pub mod contract;
#[cfg(feature = "test-util")]
pub mod fault;
#[cfg(feature = "test-util")]
mod fault_links;

pub use audit::{AuditEntry, AuditStore};
pub use caller::CallerTx;
pub use clock::{Clock, ManualClock, SystemClock};
pub use item::{
    ClaimParams, ClaimRef, Completion, CountRow, FailOutcome, FailParams, Gauges, Handover,
    ItemStore, ListCursor, ListFilter, StaleReport,
};
pub use migrations::MigrationStatus;
#[cfg(feature = "postgres")]
pub use migrations::postgres_digest;
pub use sweep::SweepStore;
pub use tx::{Tx, TxConn};
pub use wake::Wake;
pub use worker::{LOST_AFTER_BEATS, WorkerRow, WorkerStore};

/// The pool's connection limit when none is given (PostgreSQL connections;
/// SQLite's readers).
pub const POOL_SIZE_DEFAULT: u32 = 10;
/// The PostgreSQL schema holding drover's tables when none is given.
pub const SCHEMA_DEFAULT: &str = "drover";

/// Opens the store a URL names (see `drover::Queue::connect`).
///
/// # Errors
/// [`Error::InvalidInput`](drover_core::Error::InvalidInput) on `database_url` for
/// an unknown scheme; connection errors from the database.
pub async fn connect(url: &str) -> Result<std::sync::Arc<dyn Store>> {
    connect_with(url, &ConnectOptions::default()).await
}

/// How [`connect_with`] opens a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// The pool's connection limit (PostgreSQL; SQLite's readers).
    /// Default [`POOL_SIZE_DEFAULT`].
    pub pool_size: u32,
    /// The PostgreSQL schema. Default [`SCHEMA_DEFAULT`].
    pub schema: String,
    /// PostgreSQL only: the login for the documented cross-tenant operations
    /// (`DROVER_SYSTEM_DATABASE_URL` in the CLI), granted only the
    /// installation's system role, while the main URL's login holds only
    /// the runtime role. Default `None`: the main login runs both (it must
    /// hold both roles, as the owner that migrated does). Ignored by SQLite
    /// and memory. Behind a transaction pooler it may be pooled too: it is
    /// used only for single statements and explicit transactions.
    pub system_url: Option<String>,
    /// The longest a call waits for a pooled connection, connecting
    /// included (PostgreSQL): past it the call fails with
    /// [`Error::Unavailable`](drover_core::Error::Unavailable) instead of waiting
    /// out an outage. Default [`DB_TIMEOUT_DEFAULT`].
    pub db_timeout: Duration,
    /// PostgreSQL: whether the URL goes through a transaction pooler, and
    /// the direct URL for session work. Default: a direct connection.
    pub pooler: pooler::PoolerOptions,
}

/// `DROVER_DB_TIMEOUT`: how long a call waits for a database connection
/// before it fails fast (a server that is down or restarting).
pub const DB_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            pool_size: POOL_SIZE_DEFAULT,
            schema: SCHEMA_DEFAULT.to_owned(),
            system_url: None,
            db_timeout: DB_TIMEOUT_DEFAULT,
            pooler: pooler::PoolerOptions::default(),
        }
    }
}

impl ConnectOptions {
    /// The defaults with `DROVER_POOL_SIZE` applied when set (what
    /// `drover::Queue::connect` opens, so the variable the
    /// worker's pool-vs-capacity error names is honoured by the library too).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](drover_core::Error::InvalidInput) on
    /// `DROVER_POOL_SIZE` when it is not a number of at least 1.
    pub fn from_env() -> Result<Self> {
        let mut opts = ConnectOptions::default();
        if let Ok(v) = std::env::var("DROVER_POOL_SIZE") {
            opts.pool_size = match v.trim().parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(drover_core::Error::invalid(
                        "DROVER_POOL_SIZE",
                        format!("{v:?} is not a number of at least 1"),
                    ));
                }
            };
        }
        Ok(opts)
    }
}

/// Opens the store a URL names with explicit options.
///
/// # Errors
/// As [`connect`].
pub async fn connect_with(url: &str, opts: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    if url.starts_with("memory:") {
        return Ok(std::sync::Arc::new(memory::MemoryStore::new()));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return connect_postgres(url, opts).await;
    }
    if url.starts_with("sqlite:") {
        return connect_sqlite(url, opts).await;
    }
    Err(drover_core::Error::invalid(
        "database_url",
        "must start with postgres://, postgresql://, sqlite: or memory:",
    ))
}

#[cfg(feature = "postgres")]
async fn connect_postgres(url: &str, opts: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    {
        let store = postgres::PgStore::connect(
            url,
            postgres::PgOptions {
                schema: opts.schema.clone(),
                max_connections: opts.pool_size,
                system_url: opts.system_url.clone(),
                acquire_timeout: opts.db_timeout,
                pooler: opts.pooler.clone(),
            },
        )
        .await?;
        Ok(std::sync::Arc::new(store))
    }
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(_: &str, _: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    Err(drover_core::Error::invalid(
        "database_url",
        "this build of drover has no PostgreSQL store (cargo feature `postgres`)",
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn connect_sqlite(_: &str, _: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    Err(drover_core::Error::invalid(
        "database_url",
        "this build of drover has no SQLite store (cargo feature `sqlite`)",
    ))
}

#[cfg(feature = "sqlite")]
async fn connect_sqlite(url: &str, opts: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    let store = sqlite::SqliteStore::open(
        url,
        sqlite::SqliteOptions {
            max_readers: opts.pool_size,
            ..sqlite::SqliteOptions::default()
        },
    )
    .await?;
    Ok(std::sync::Arc::new(store))
}

/// Which storage engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// PostgreSQL: production, many processes on many hosts.
    Postgres,
    /// SQLite: the embedded default, one file.
    Sqlite,
    /// In process memory: tests of handlers.
    Memory,
}

/// The storage seam. See the module docs for the invariants.
///
/// Every method is cancel safe in the sense that matters for a queue: a
/// dropped future either committed its single statement or did not; it never
/// leaves a half-applied transition.
#[async_trait]
pub trait Store:
    ItemStore
    + AuditStore
    + WorkerStore
    + SweepStore
    + throughput::ThroughputStore
    + orchestration::OrchestrationStore
    + schedule::ScheduleStore
    + reconcile::ReconcileStore
    + runs::RunStore
    + outbox::OutboxStore
    + events::EventStore
    + lane::LaneStore
    + limits::LimitStore
    + parking::ParkStore
    + rates::RateStore
    + closures::ClosureStore
    + fairness::FairnessStore
    + links::LinkStore
    + access::AccessStore
    + projector::ProjectorStore
    + vacuum::VacuumStore
    + Send
    + Sync
    + 'static
{
    /// Which engine this is.
    fn backend(&self) -> Backend;

    /// A gathered batch of requests written whole ([`gathered`]): claims
    /// the `Idempotency-Key` markers of `claims` (one entry per input,
    /// `None` for an input without a key), then inserts the inputs whose
    /// claim started or that hold none. `prepared[i]` is input i validated,
    /// or the error its answer is made from (a request refused before the
    /// store; its marker, if started, stores that answer). Returns the
    /// batch waiting for its answers: [`gathered::Gathered::commit`] stores
    /// them and commits. On the error nothing of the batch was written and
    /// no marker is left held.
    ///
    /// The default claims in [`AccessStore::marker_begin_many`]'s own
    /// transaction, then inserts in a second; PostgreSQL overrides it with
    /// one transaction for the lot, held open until the commit (a key in
    /// flight is told by an advisory lock there, so it still answers
    /// [`MarkerBegin::InFlight`]).
    ///
    /// [`AccessStore::marker_begin_many`]: access::AccessStore::marker_begin_many
    /// [`MarkerBegin::InFlight`]: access::MarkerBegin::InFlight
    async fn item_insert_each_claimed<'a>(
        &'a self,
        claims: &[Option<access::MarkerClaim>],
        prepared: Vec<Result<NewItem>>,
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<Box<dyn gathered::Gathered + 'a>> {
        gathered::write_in_steps(self, claims, prepared, retention, stale_after).await
    }

    /// Inserts the prepared `item` on the caller's connection, inside the
    /// caller's transaction (the store's seam for a caller's transaction;
    /// see `caller`). The default writes with the backend of `conn`.
    ///
    /// # Errors
    /// [`Error::Config`](drover_core::Error::Config) when `conn` is of another
    /// engine than this store; database errors.
    async fn item_insert_in(&self, conn: CallerTx<'_>, item: &NewItem) -> Result<Inserted> {
        caller::item_insert_in(self, conn, item).await
    }

    /// Enqueues `items` with their links ([`links::LinkStore::links_insert`])
    /// on the caller's connection, inside the caller's transaction: all of
    /// them or none, and only if the caller's transaction commits.
    ///
    /// # Errors
    /// As [`links::LinkStore::links_insert`] and [`Store::item_insert_in`].
    async fn links_insert_in(
        &self,
        conn: CallerTx<'_>,
        items: &[NewItem],
    ) -> Result<Vec<Inserted>> {
        caller::links_insert_in(self, conn, items).await
    }

    /// Starts an orchestration (its record and first step item) on the
    /// caller's connection, inside the caller's transaction.
    ///
    /// # Errors
    /// As [`Store::item_insert_in`].
    async fn orchestration_insert_in(
        &self,
        conn: CallerTx<'_>,
        new: &crate::orchestration::NewOrchestration,
        first: &NewItem,
    ) -> Result<crate::orchestration::OrchestrationInserted> {
        caller::orchestration_insert_in(self, conn, new, first).await
    }

    /// Writes the validated outbox `row` on the caller's connection, inside
    /// the caller's transaction.
    ///
    /// # Errors
    /// As [`Store::item_insert_in`].
    async fn outbox_insert_in(
        &self,
        conn: CallerTx<'_>,
        row: &crate::outbox::NewOutboxRow,
    ) -> Result<()> {
        caller::outbox_insert_in(self, conn, row).await
    }

    /// Opens a transaction on the store's own database for a caller
    /// ([`tx`]): the caller's statements and the `*_in` writes on it commit
    /// or roll back together. PostgreSQL: a transaction of the store's
    /// pool as its login, with the login's own `search_path`; SQLite: the
    /// one writer's `BEGIN IMMEDIATE`.
    ///
    /// # Errors
    /// [`Error::Config`](drover_core::Error::Config) for a store whose writes
    /// share no database with a caller (the memory store: use the writes
    /// that run in a transaction of their own); database errors.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the transaction is never handed out and is
    /// rolled back.
    async fn tx_begin(&self) -> Result<Tx> {
        Err(drover_core::Error::Config(format!(
            "the {} store has no caller transactions: its writes share no database with \
             the caller's (enqueue, start and write outbox rows in transactions of their own)",
            format!("{:?}", self.backend()).to_lowercase()
        )))
    }

    /// The connections the store's pool may open, if it has a pool; the
    /// worker checks its capacity against it.
    fn pool_size(&self) -> Option<u32> {
        None
    }

    /// The PostgreSQL schema, for stores that have one; transactional
    /// enqueue on a caller's connection needs it.
    fn pg_schema(&self) -> Option<&str> {
        None
    }

    /// The store's idea of now (its injected clock; the wall clock by
    /// default). PostgreSQL's own statements use the database clock.
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// The database's clock (PostgreSQL's `now()`; the injected clock on
    /// SQLite and memory, whose "database" is this process). The scheduler
    /// computes ticks from it, so workers whose clocks disagree still agree
    /// on the ticks.
    async fn db_now(&self) -> Result<DateTime<Utc>> {
        Ok(self.now())
    }

    /// Publishes an in-process wake-up for `lane` (after a caller's own
    /// transaction committed an item). A hint: losing it costs a poll.
    fn wake(&self, _lane: &str) {}

    /// Applies the embedded migrations; idempotent.
    async fn migrate(&self) -> Result<()>;

    /// Where the database's migrations stand against the ones this binary
    /// embeds (`/readyz` refuses while one is missing). A store without
    /// migrations reports [`MigrationStatus::NONE`].
    ///
    /// # Errors
    /// [`drover_core::Error::Unavailable`] when the database does not answer.
    async fn migration_status(&self) -> Result<MigrationStatus> {
        Ok(MigrationStatus::NONE)
    }

    /// The age of the oldest transaction open in the database, for the
    /// `drover_db_oldest_xact_age_seconds` gauge; `None` where the engine
    /// has no such thing to watch (SQLite, memory).
    ///
    /// # Errors
    /// [`drover_core::Error::Unavailable`] when the database does not answer.
    async fn db_oldest_xact_age(&self) -> Result<Option<Duration>> {
        Ok(None)
    }

    /// Subscribes to wake-ups: each names a lane that got work and, where
    /// the backend has one, a nonce every listener of that wake-up shares
    /// ([`Wake`]). A wake-up is a hint; a lagged receiver should simply claim.
    async fn wakeups(&self) -> Result<tokio::sync::broadcast::Receiver<Wake>>;
}
