//! The storage seam: one trait every backend implements, grouped by entity
//! and named entity-then-verb (`item_claim`, `item_complete`, `worker_beat`).
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
//!   [`Error::Conflict`](crate::Error::Conflict) (single, transactional) or
//!   [`InsertResult::IdTaken`] for that row (bulk), never that item or any
//!   field of it. The own key wins over a foreign id so that the answer to a
//!   keyed retry does not depend on what another tenant holds.
//! - A claim hands each item to exactly one claimer, stamps a fresh random
//!   token, increments `claim_seq`, and sets the lease from the store's clock
//!   (the database clock on PostgreSQL).
//! - Every write after a claim is conditioned, in one statement, on the token,
//!   on `status = 'claimed'` and on the lease not having passed; otherwise it
//!   changes nothing and returns [`Error::Conflict`](crate::Error::Conflict).
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
use uuid::Uuid;

use crate::error::Result;
use crate::item::{InsertResult, Inserted, Item, NewItem, Status};
use crate::rules::RetryPolicy;

#[cfg(feature = "postgres")]
mod begin;
pub mod clock;
pub mod memory;
mod migrations;
pub mod pooler;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "test-util")]
pub mod contract;
#[cfg(feature = "test-util")]
pub mod fault;

pub use clock::{Clock, ManualClock, SystemClock};
pub use migrations::MigrationStatus;

/// The pool's connection limit when none is given (PostgreSQL connections;
/// SQLite's readers).
pub const POOL_SIZE_DEFAULT: u32 = 10;
/// The PostgreSQL schema holding drover's tables when none is given.
pub const SCHEMA_DEFAULT: &str = "drover";

/// Opens the store a URL names (see [`crate::Queue::connect`]).
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) on `database_url` for
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
    /// [`Error::Unavailable`](crate::Error::Unavailable) instead of waiting
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
    /// [`Queue::connect`](crate::Queue::connect) opens, so the variable the
    /// worker's pool-vs-capacity error names is honoured by the library too).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) on
    /// `DROVER_POOL_SIZE` when it is not a number of at least 1.
    pub fn from_env() -> Result<Self> {
        let mut opts = ConnectOptions::default();
        if let Ok(v) = std::env::var("DROVER_POOL_SIZE") {
            opts.pool_size = match v.trim().parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(crate::Error::invalid(
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
    Err(crate::Error::invalid(
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
    Err(crate::Error::invalid(
        "database_url",
        "this build of drover has no PostgreSQL store (cargo feature `postgres`)",
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn connect_sqlite(_: &str, _: &ConnectOptions) -> Result<std::sync::Arc<dyn Store>> {
    Err(crate::Error::invalid(
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

/// What a claim asks for.
#[derive(Debug, Clone)]
pub struct ClaimParams {
    /// The lane to take from.
    pub lane: String,
    /// Only items of these kinds; empty means every kind.
    pub kinds: Vec<String>,
    /// The claiming worker, stamped as `claimed_by`.
    pub worker_id: String,
    /// How long the claim holds before it may be swept.
    pub lease: Duration,
    /// At most this many items.
    pub limit: u32,
}

/// A handle on a claim: everything a fenced write needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClaimRef {
    /// The item's tenant: the write runs under it.
    pub tenant_id: Uuid,
    /// The item.
    pub id: Uuid,
    /// The token of the claim this write belongs to.
    pub token: Uuid,
}

impl ClaimRef {
    /// The handle on the current claim of a claimed item, if it has one.
    pub fn of(item: &Item) -> Option<ClaimRef> {
        item.claim_token.map(|token| ClaimRef {
            tenant_id: item.tenant_id,
            id: item.id,
            token,
        })
    }
}

/// How a failure is recorded.
#[derive(Debug, Clone)]
pub struct FailParams {
    /// The message kept as `last_error` (bounded by the store).
    pub error: String,
    /// The delay before the retry, if the budget allows one.
    pub retry_delay: Duration,
    /// Skip the budget: dead-letter now.
    pub fatal: bool,
}

/// What a failure did to the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum FailOutcome {
    /// Pending again, not before `available_at`; one attempt spent.
    Requeued {
        /// When it may run again.
        available_at: DateTime<Utc>,
    },
    /// The budget is spent (or the failure was fatal): final, audited.
    DeadLettered,
}

/// What a sweep of stale claims did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleReport {
    /// Lease-expired items made pending again (one attempt spent each).
    pub requeued: u64,
    /// Lease-expired items whose budget was spent: dead-lettered and audited.
    pub dead_lettered: u64,
}

/// A filter for [`Store::item_list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this tenant's items; `None` lists across tenants (a system operation).
    pub tenant_id: Option<Uuid>,
    /// Only items in this status.
    pub status: Option<Status>,
    /// Only items in this lane.
    pub lane: Option<String>,
    /// Only items of this kind.
    pub kind: Option<String>,
    /// Only the item with this idempotency key.
    pub key: Option<String>,
    /// Only items created at or after this.
    pub created_after: Option<DateTime<Utc>>,
    /// Only items created before this.
    pub created_before: Option<DateTime<Utc>>,
    /// Only items whose last error contains this text (case-insensitive).
    pub error_contains: Option<String>,
    /// A cursor: only items after this one in the listing's order (newest
    /// first), given as the last item of the previous page.
    pub after: Option<ListCursor>,
    /// At most this many (newest first).
    pub limit: u32,
}

/// Where a page of [`Store::item_list`] ended: the last item's creation
/// time and id. PostgreSQL and memory order by id (time-ordered v7);
/// SQLite by creation time then id; each backend continues after the
/// cursor in its own order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCursor {
    /// The last item's `created_at`.
    pub created_at: DateTime<Utc>,
    /// The last item's id.
    pub id: Uuid,
}

/// One row of [`Store::counts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountRow {
    /// The lane.
    pub lane: String,
    /// The kind.
    pub kind: String,
    /// The status.
    pub status: Status,
    /// How many items.
    pub count: i64,
}

/// The health gauges the sweep publishes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gauges {
    /// Per lane, the age in seconds of the oldest item that is available and
    /// still pending (0 when none waits).
    pub oldest_age_seconds: Vec<(String, f64)>,
    /// Items in the dead letter.
    pub failed: i64,
}

/// An audit entry: a dead letter, an operator's cancel or retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The item.
    pub item_id: Uuid,
    /// `dead_letter`, `cancel` or `retry`.
    pub action: String,
    /// Who did it (nil for the system).
    pub actor: Uuid,
    /// Free text (the last error for a dead letter).
    pub detail: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A worker not offline whose last beat is older than this many of its own
/// beat intervals, by the store's clock, is listed as `lost`: it died
/// without shutting down. Two, so one late or failed publish never makes a
/// live worker look lost, while a dead one shows within two intervals.
pub const LOST_AFTER_BEATS: u32 = 2;

/// A worker's liveness row, as the dashboard reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRow {
    /// Worker id (unique per process run).
    pub id: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Lanes it drains.
    pub lanes: Vec<String>,
    /// Its capacity.
    pub capacity: i32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last published beat. The store stamps it with its own clock
    /// (the database clock on PostgreSQL) whatever the row carries, so
    /// liveness is judged against one clock.
    pub last_beat_at: DateTime<Utc>,
    /// `running`, `draining` or `offline` as the worker published it; on
    /// read, `lost` when not offline and no beat landed for
    /// [`LOST_AFTER_BEATS`] intervals.
    pub state: String,
    /// How often the worker beats, in milliseconds (at least 1).
    pub beat_interval_ms: i32,
}

/// The storage seam. See the module docs for the invariants.
///
/// Every method is cancel safe in the sense that matters for a queue: a
/// dropped future either committed its single statement or did not; it never
/// leaves a half-applied transition.
#[async_trait]
pub trait Store:
    crate::orchestration::OrchestrationStore
    + crate::periodic::ScheduleStore
    + crate::lane::LaneStore
    + crate::access::AccessStore
    + Send
    + Sync
    + 'static
{
    /// Which engine this is.
    fn backend(&self) -> Backend;

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
    /// [`crate::Error::Unavailable`] when the database does not answer.
    async fn migration_status(&self) -> Result<MigrationStatus> {
        Ok(MigrationStatus::NONE)
    }

    /// The age of the oldest transaction open in the database, for the
    /// `drover_db_oldest_xact_age_seconds` gauge; `None` where the engine
    /// has no such thing to watch (SQLite, memory).
    ///
    /// # Errors
    /// [`crate::Error::Unavailable`] when the database does not answer.
    async fn db_oldest_xact_age(&self) -> Result<Option<Duration>> {
        Ok(None)
    }

    /// Inserts one item, never overwriting; an id held by another tenant is
    /// `Conflict` (see the module docs for the collision rule).
    ///
    /// `item` must already be validated; the store stamps `status = pending`,
    /// `attempts = 0`, no claim, `updated_by = created_by`.
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted>;

    /// Inserts many items in one statement; one result per input, in order
    /// (`IdTaken` for an id held by another tenant).
    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>>;

    /// Reads an item of `tenant` by id.
    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>>;

    /// Reads an item of `tenant` by idempotency key.
    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>>;

    /// Claims up to `limit` available items (system operation, across tenants),
    /// in priority then `available_at` order.
    async fn item_claim(&self, params: &ClaimParams) -> Result<Vec<Item>>;

    /// Marks a claimed item done. Fenced.
    async fn item_complete(&self, claim: &ClaimRef) -> Result<()>;

    /// Marks many claimed items done in one statement, each row fenced on its
    /// own token. Returns the ids that landed; the others were stale.
    async fn item_complete_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>>;

    /// Records a failure: requeue after `retry_delay` with one attempt spent,
    /// or dead-letter (with an audit entry) at the budget or when fatal. Fenced.
    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome>;

    /// Makes a claimed item pending again after `delay`, spending no attempt.
    /// Fenced. Returns the new `available_at`.
    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>>;

    /// Makes a claimed item pending again now, spending no attempt, keeping
    /// `note` as `last_error` when given. Fenced.
    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()>;

    /// Extends the lease to `lease` from now. Fenced. Returns the new expiry.
    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>>;

    /// Cancels a claimed item at its handler's request (final, no attempt
    /// spent), keeping `note` as `last_error`. Fenced.
    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()>;

    /// Fails an item whose tenant is gone, conditioned on its token; no audit
    /// entry (system operation).
    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()>;

    /// Tenants that have claimed items whose lease has passed (system
    /// operation), at most `limit`.
    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>>;

    /// Hands back up to `limit` of `tenant`'s lease-expired items as failed
    /// attempts (`last_error = "lease expired"`): requeued with the policy's
    /// nominal delay, or dead-lettered at the budget.
    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport>;

    /// Deletes final items (`done`, `failed`, `cancelled`) last updated before
    /// `before`, in batches of `batch` (system operation). Returns how many.
    async fn item_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;

    /// Cancels a pending or claimed item (operator). `Conflict` if final.
    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item>;

    /// Makes a failed, cancelled or done item pending now with a fresh
    /// budget (operator). `Conflict` if pending or claimed.
    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item>;

    /// Lists items, newest first.
    async fn item_list(&self, filter: &ListFilter) -> Result<Vec<Item>>;

    /// Counts per lane, kind and status (system operation).
    async fn counts(&self) -> Result<Vec<CountRow>>;

    /// Counts per kind and status of one lane (system operation), from the
    /// lane's index entries rather than the whole table on PostgreSQL and
    /// SQLite. The default filters [`Store::counts`], for custom stores.
    async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        let mut rows = self.counts().await?;
        rows.retain(|r| r.lane == lane);
        Ok(rows)
    }

    /// The health gauges (system operation).
    async fn gauges(&self) -> Result<Gauges>;

    /// The audit entries of one item, oldest first.
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>>;

    /// Publishes a worker's liveness row (insert or update), stamping
    /// `last_beat_at` with the store's clock (system operation).
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()>;

    /// Lists worker rows, most recent beat first, reporting `lost` for a
    /// worker that stopped beating (see [`LOST_AFTER_BEATS`]).
    async fn worker_list(&self) -> Result<Vec<WorkerRow>>;

    /// Deletes the rows of workers whose last beat is older than
    /// `older_than` by the store's clock (system operation). Returns how
    /// many.
    async fn worker_purge(&self, older_than: Duration) -> Result<u64>;

    /// Subscribes to wake-ups: each message names a lane that got work.
    /// A wake-up is a hint; a lagged receiver should simply claim.
    async fn wakeups(&self) -> Result<tokio::sync::broadcast::Receiver<String>>;

    /// Takes the sweep lease for `holder` when nobody holds it or its
    /// holder's lease has passed (on the store's clock: the database clock
    /// on PostgreSQL), for `lease` from now. `Some(token)` when taken, `None`
    /// when another holder's lease still runs. Not re-entrant: a holder
    /// asking again while its lease runs gets `None`.
    ///
    /// The lease is a row, not a session: a holder that stalls (paused,
    /// hung, partitioned) loses it when its lease passes, and any worker may
    /// take it then.
    async fn sweep_lease_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>>;

    /// Extends the sweep lease held under `token` to `lease` from now.
    /// Fenced: [`Error::Conflict`](crate::Error::Conflict) when `token` no
    /// longer holds it (released, or passed, whether or not taken since).
    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()>;

    /// Gives up the sweep lease held under `token`, so the next sweeper need
    /// not wait for it to pass; `completed` records now as the end of the
    /// last completed sweep pass. Fenced on `token`: when it no longer holds
    /// nothing changes and the answer is `false` (not an error).
    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool>;

    /// When the last completed sweep pass of any process ended, if one has.
    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>>;
}
