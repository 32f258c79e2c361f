//! The SQLite backend: the embedded default, one file, no server, the same
//! semantics as PostgreSQL.
//!
//! # What this module owns
//!
//! [`SqliteStore`], its connection pools, its schema (`migrations/sqlite/`),
//! its statements (`sql/sqlite/`, one file each), the in-process wake-up
//! channel, the watch that carries other processes' commits to it
//! (`watch`) and the WAL's checkpoints beside the writer (`checkpoint`).
//!
//! # Invariants
//!
//! - **One writer.** Every write goes through a pool of exactly one
//!   connection and runs in a `BEGIN IMMEDIATE` transaction, which takes the
//!   write lock up front: there is never a read-to-write lock upgrade, so
//!   never a deadlock between two writers, and a claim's select-then-update
//!   is exclusive. Reads use a separate pool of `max_readers` connections,
//!   marked `query_only`, that WAL lets run beside the writer.
//! - **The clock is Rust's.** SQLite has no shared clock we trust, so every
//!   "now" is read from [`SqliteOptions::clock`] and bound as a parameter;
//!   leases are compared against it in the statement itself. Tests move a
//!   [`ManualClock`](crate::ManualClock) instead of sleeping.
//! - **Instants are INTEGER microseconds** since the Unix epoch; UUIDs are
//!   16-byte BLOBs; payloads are JSON text.
//! - **Tenant isolation is the WHERE clause.** SQLite has no row-level
//!   security: every per-tenant statement carries `tenant_id = ?`; the
//!   contract suite checks each one.
//! - **Fences in the statement.** Complete, fail, defer, release and
//!   extend-lease are conditioned on `claim_token`, `status = 'claimed'` and
//!   `lease_expires_at > now` in one `UPDATE`; zero rows is
//!   [`Error::Conflict`] (or `NotFound`, decided by a
//!   read on the error path only).
//! - **Wake-ups after commit.** A lane's name is broadcast in process once
//!   per statement that made work available in it, after the commit.
//!   Another process's commit to the file reaches this process's listeners
//!   as a wake-up of every lane within [`SqliteOptions::watch_interval`]
//!   (`watch`: `PRAGMA data_version` on the writer).
//!
//! # Durability
//!
//! The database runs in WAL mode with `synchronous = NORMAL`: a commit is
//! durable against a crash of the process, and a power loss or OS crash can
//! lose at most the last commits before the WAL was synced; it never
//! corrupts the file. `FULL` would sync on every commit at a large cost to
//! throughput; [`SqliteOptions::synchronous_full`] turns it on.
//!
//! # The sweep lease
//!
//! [`SweepStore::sweep_lease_take`](crate::SweepStore::sweep_lease_take) takes a row of the file (`sweep_lease`) on
//! the store's clock, so one process sweeps at a time however many share
//! the file, and a stalled holder loses the lease when it passes. Were two
//! to sweep at once it would still be safe, since every sweep step is a
//! conditional, idempotent statement; they would only duplicate work.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::broadcast;

use crate::{Backend, Clock, Store, SystemClock};
use drover_core::error::{Error, Result};
use drover_core::item::{Inserted, NewItem};

mod access;
mod audit;
mod claim;
mod events;
mod fair_groups;
mod fair_limited;
mod fairness;
mod flow_gen;
mod insert;
mod item;
mod lanes;
mod limits;
mod links;
pub use links::links_insert_in;
mod maint;
mod orchestration;
pub use orchestration::start_in;
mod outbox;
pub use outbox::outbox_insert_in;
mod checkpoint;
mod closures;
mod parking;
mod projector;
mod rates;
mod read;
mod reconcile;
mod row;
mod runs;
mod schedule;
mod sql;
mod sweep;
#[cfg(feature = "test-util")]
mod testing;
mod throughput;
mod vacuum;
mod watch;
pub use checkpoint::{CHECKPOINT_EVERY, WRITER_AUTOCHECKPOINT};
pub use watch::WATCH_INTERVAL_DEFAULT;
mod worker;

#[cfg(feature = "test-util")]
pub use testing::sqlite_harness;

/// How long a connection waits for the write lock before giving up, by default.
pub const BUSY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// How many read connections the store opens at most, by default.
pub const MAX_READERS_DEFAULT: u32 = 4;

use crate::migrations::embedded::SQLITE as MIGRATIONS;

/// How a [`SqliteStore`] is opened. Every field has a default.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The source of "now" for leases, availability and bookkeeping.
    /// Default: [`SystemClock`].
    pub clock: Arc<dyn Clock>,
    /// How long a statement waits for a lock held by another connection
    /// (another process, or a caller's transaction) before failing with a
    /// transient error. Default: [`BUSY_TIMEOUT_DEFAULT`].
    pub busy_timeout: Duration,
    /// Read connections, beside the one writer. Default:
    /// [`MAX_READERS_DEFAULT`]. Ignored for `sqlite::memory:`, where reads
    /// share the writer's connection.
    pub max_readers: u32,
    /// `synchronous = FULL` instead of `NORMAL`: survive power loss without
    /// losing the last commits, at the cost of a sync per commit.
    /// Default: false.
    pub synchronous_full: bool,
    /// How often a store with a wake-up subscriber (a worker, a relay)
    /// looks whether another process committed to the file, and if so
    /// wakes every lane: a cheap `PRAGMA data_version` on the idle writer,
    /// so work written by another process (`drover enqueue`, a producer
    /// service) is picked up within about this long rather than at the
    /// next poll. `None`: never (such work waits for the poll). Ignored
    /// for `sqlite::memory:`. Default: [`WATCH_INTERVAL_DEFAULT`] (10 ms).
    pub watch_interval: Option<Duration>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            clock: Arc::new(SystemClock),
            busy_timeout: BUSY_TIMEOUT_DEFAULT,
            max_readers: MAX_READERS_DEFAULT,
            synchronous_full: false,
            watch_interval: Some(WATCH_INTERVAL_DEFAULT),
        }
    }
}

/// The SQLite implementation of [`Store`]. Cheap to clone: clones share the
/// pools, the clock, the wake-up channel and the watch of other processes'
/// commits.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    clock: Arc<dyn Clock>,
    wake: super::wake::WakeBus,
    /// Other processes' commits, as wake-ups (started by the first subscriber).
    watch: Arc<watch::Watch>,
    /// The WAL's checkpoints, beside the writer (`checkpoint`).
    checkpoints: Arc<checkpoint::Checkpointer>,
    /// The limits in force as the last claim read them (so a claim of a
    /// lane no limit applies to reads nothing more).
    limits: Arc<crate::limits::LimitCache>,
    /// The rates in force as the last claim read them.
    rates: Arc<crate::rates::RateCache>,
    /// The fair-share settings as last read.
    fair: Arc<crate::fairness::FairCache>,
    /// Per lane, the tenants with pending work as a fair claim last read
    /// them (voided by this process's enqueues).
    fair_lists: Arc<crate::fairness::TenantLists>,
    /// Per lane, the passes as this process last read or wrote them.
    fair_passes: Arc<crate::fairness::PassCache>,
    /// The groups with parked items, as this process last read them.
    parked: Arc<crate::parking::ParkedCache>,
}

/// Parses what a user may pass: `sqlite://path.db`, `sqlite:path.db`, a bare
/// path, or `sqlite::memory:`. Returns the options and whether the database
/// lives in memory.
fn parse_target(url_or_path: &str) -> Result<(SqliteConnectOptions, bool)> {
    let s = url_or_path.trim();
    if s.is_empty() {
        return Err(Error::Config("the SQLite path is empty".into()));
    }
    let opts = if s.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(s)
            .map_err(|e| Error::Config(format!("invalid SQLite URL {s:?}: {e}")))?
    } else if s == ":memory:" {
        SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(|e| Error::Config(format!("invalid SQLite URL {s:?}: {e}")))?
    } else {
        SqliteConnectOptions::new().filename(s)
    };
    let memory = s == ":memory:"
        || s.starts_with("sqlite::memory:")
        || s.starts_with("sqlite://:memory:")
        || s.contains("mode=memory");
    Ok((opts, memory))
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url_or_path`:
    /// `sqlite://path.db`, `sqlite:path.db`, a bare path, or
    /// `sqlite::memory:` (a private in-memory database, kept alive by the
    /// store's one connection until the store is dropped or closed).
    ///
    /// Does not migrate; call [`Store::migrate`].
    ///
    /// # Errors
    /// [`Error::Config`] for an unparsable URL; [`Error::Unavailable`] or
    /// [`Error::Storage`] when the file cannot be opened.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped open leaves at most a created, empty file.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo() -> drover_core::Result<()> {
    /// use drover_store::{ItemStore, Store};
    /// use drover_store::sqlite::{SqliteOptions, SqliteStore};
    ///
    /// let store = SqliteStore::open("sqlite://drover.db", SqliteOptions::default()).await?;
    /// store.migrate().await?;
    /// let item = drover_core::NewItem::new("send_email", serde_json::json!({"to": "a@example.com"}));
    /// store.item_insert(&item).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(url_or_path: &str, opts: SqliteOptions) -> Result<SqliteStore> {
        let (base, memory) = parse_target(url_or_path)?;
        let base = base
            .create_if_missing(true)
            .busy_timeout(opts.busy_timeout)
            .foreign_keys(true)
            // A dependant dead-lettered by the finishing trigger (migration
            // 0039) finishes its own dependants in turn.
            .pragma("recursive_triggers", "ON");
        let synchronous = if opts.synchronous_full {
            SqliteSynchronous::Full
        } else {
            SqliteSynchronous::Normal
        };
        let writer_opts = if memory {
            base.clone()
        } else {
            base.clone()
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(synchronous)
                // The checkpoints run beside the writer (`checkpoint`).
                .pragma("wal_autocheckpoint", WRITER_AUTOCHECKPOINT.to_string())
        };
        // One connection, never recycled: it is the single writer, and for
        // an in-memory database it is what keeps the database alive.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            // A file connection cannot be dropped by a server: the ping
            // before each checkout would only add a hop to the connection's
            // thread in front of every write.
            .test_before_acquire(false)
            .after_release(|conn, _| Box::pin(end_abandoned_transaction(conn)))
            .connect_with(writer_opts)
            .await?;
        let reader = if memory {
            // A second connection would open a second, empty database (or
            // need shared-cache mode and its table locks): reads share the writer.
            writer.clone()
        } else {
            // Opened after the writer has switched the file to WAL, which is
            // persistent; `query_only` makes a write through a reader fail
            // loudly instead of bypassing the single writer.
            SqlitePoolOptions::new()
                .max_connections(opts.max_readers.max(1))
                .test_before_acquire(false)
                .connect_with(base.clone().pragma("query_only", "ON"))
                .await?
        };
        tracing::debug!(target: "drover::sqlite", path = url_or_path, memory, "opened");
        // An in-memory database has no WAL to copy back.
        let checkpoints = Arc::new(if memory {
            checkpoint::Checkpointer::default()
        } else {
            checkpoint::Checkpointer::start(base.pragma("query_only", "ON"))
        });
        Ok(SqliteStore {
            checkpoints,
            writer,
            reader,
            clock: opts.clock,
            wake: super::wake::WakeBus::new(),
            // No other process can reach a private in-memory database.
            watch: Arc::new(watch::Watch::new(if memory {
                None
            } else {
                opts.watch_interval.filter(|d| !d.is_zero())
            })),
            limits: Arc::default(),
            rates: Arc::default(),
            fair: Arc::default(),
            fair_lists: Arc::default(),
            fair_passes: Arc::default(),
            parked: Arc::default(),
        })
    }

    /// The writer pool (one connection). A caller's transaction for
    /// [`insert_in`] can be taken from it (`pool.begin_with("BEGIN IMMEDIATE")`);
    /// while the caller holds it, the store's own writes wait. It is the only
    /// way to reach an in-memory database.
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    /// Publishes a wake-up for `lane`, e.g. after committing a transaction
    /// that used [`insert_in`]. A hint: losing it delays work by at most the
    /// poll interval.
    pub fn notify(&self, lane: &str) {
        // A lane's tenant list may miss the tenant just enqueued for.
        self.fair_lists.touch();
        // Counted: every subscriber sees the same nonce.
        self.wake.counted(lane);
    }

    /// Closes both pools, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.watch.stop();
        self.checkpoints.stop();
        self.writer.close().await;
        self.reader.close().await;
    }

    /// The store's current time, from its clock: what a caller of
    /// [`insert_in`] should pass as `now`.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Starts a write transaction holding the write lock from the start.
    ///
    /// Opened in place, not through `store/begin.rs`: a caller dropping it
    /// right after `BEGIN IMMEDIATE` is caught by the writer pool's release
    /// check ([`end_abandoned_transaction`], which reads SQLite's own
    /// transaction state), and a SQLite transaction is cheap enough that a
    /// task per opening cost about 8 % of the drain rate.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Broadcasts each distinct lane once; call only after the commit.
    fn wake_lanes<'a>(&self, lanes: impl IntoIterator<Item = &'a str>) {
        let distinct: BTreeSet<&str> = lanes.into_iter().collect();
        for lane in distinct {
            self.notify(lane);
        }
    }
}

/// Rolls back a transaction that a dropped future left open on a writer
/// connection, as the connection goes back to the pool.
///
/// Why: sqlx runs a custom `BEGIN` (ours is `BEGIN IMMEDIATE`) and then
/// awaits a check that it opened a transaction before it builds the
/// `Transaction` guard. A caller that gives up on a write at that await
/// (a timeout, a `select!`) drops the future with `BEGIN IMMEDIATE` done
/// and no guard to roll it back: the connection returns to the pool inside
/// the transaction, still holding the file's write lock. Every other
/// process's write then fails after the busy timeout, and every later
/// `begin` on this connection fails (a custom `BEGIN` inside a
/// transaction), for as long as the process lives.
///
/// It covers the store's own writes and the transactions callers open on
/// [`SqliteStore::writer`] themselves (for [`insert_in`]).
///
/// A transaction whose guard was dropped has its rollback queued, not yet
/// run; the ping is answered after it, so only a transaction that is still
/// open after the ping was abandoned.
async fn end_abandoned_transaction(
    conn: &mut SqliteConnection,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::{Connection, TransactionManager};

    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    if conn.is_in_transaction() {
        tracing::warn!(target: "drover::sqlite",
            "a write was dropped right after BEGIN; rolling back its transaction");
        sqlx::sqlite::SqliteTransactionManager::rollback(conn).await?;
    }
    Ok(true)
}

/// Enqueues `item` inside the caller's own transaction on `conn`, so the item
/// exists if and only if the caller commits. `now` stamps `updated_at` and
/// `available_at` when the item names none.
///
/// The caller's transaction should be `BEGIN IMMEDIATE`, like the store's,
/// so it never has to upgrade a read lock. No wake-up is sent to this
/// process's workers (the store cannot see the commit): call
/// [`SqliteStore::notify`] after committing, or let their poll find it.
/// Workers of other processes on the file see the commit through their
/// store's watch ([`SqliteOptions::watch_interval`]).
///
/// # Errors
/// As [`ItemStore::item_insert`](crate::ItemStore::item_insert); a collision is not an error but an
/// [`InsertResult`](drover_core::item::InsertResult). An id held by another tenant's item is
/// [`Error::Conflict`], without that item.
///
/// # Cancel safety
/// The statement runs inside the caller's transaction: a dropped call leaves
/// it to the caller to roll back or commit.
///
/// # Example
/// ```no_run
/// # async fn demo(store: &drover_store::sqlite::SqliteStore) -> drover_core::Result<()> {
/// use drover_store::sqlite::insert_in;
///
/// let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await?;
/// // ... the caller's own writes on `&mut *tx` ...
/// let item = drover_core::NewItem::new("send_receipt", serde_json::json!({"order": 7}));
/// insert_in(&mut tx, &item, store.now()).await?;
/// tx.commit().await?;
/// store.notify(&item.lane);
/// # Ok(()) }
/// ```
pub async fn insert_in(
    conn: &mut SqliteConnection,
    item: &NewItem,
    now: DateTime<Utc>,
) -> Result<Inserted> {
    if item.is_linked() {
        return crate::links::one(
            links::links_insert_in(conn, std::slice::from_ref(item), now).await?,
        );
    }
    insert::insert_on(conn, item, now).await
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn now(&self) -> DateTime<Utc> {
        SqliteStore::now(self)
    }

    fn wake(&self, lane: &str) {
        self.notify(lane);
    }

    async fn tx_begin(&self) -> Result<crate::Tx> {
        let tx = self.begin().await?;
        let store = self.clone();
        let waker: crate::tx::Waker = Arc::new(move |lane: &str| store.notify(lane));
        Ok(crate::Tx::from_sqlite(tx, waker))
    }

    async fn migrate(&self) -> Result<()> {
        crate::migrations::migrator(MIGRATIONS)
            .await?
            .run(&self.writer)
            .await?;
        Ok(())
    }

    async fn migration_status(&self) -> Result<crate::MigrationStatus> {
        use sqlx::Row;
        let embedded = crate::MigrationStatus::embedded_by(MIGRATIONS);
        let rows = match sqlx::query(sql::MIGRATIONS_STATUS)
            .fetch_all(&self.reader)
            .await
        {
            Ok(rows) => rows,
            // No migrations table yet: nothing is applied.
            Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let recorded = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>("version")?,
                    r.try_get::<bool, _>("success")?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(crate::MigrationStatus::of(&embedded, &recorded))
    }

    async fn wakeups(&self) -> Result<broadcast::Receiver<super::Wake>> {
        // Before subscribing returns, so no later commit is missed. A file
        // that cannot be read now leaves the subscriber to its poll (and
        // the next subscriber tries again).
        if let Err(e) = self.watch.start(&self.writer, &self.wake).await {
            tracing::warn!(target: "drover::sqlite", error = %e,
                "cannot watch the file for other processes' commits; their work waits for the poll");
        }
        Ok(self.wake.subscribe())
    }
}
