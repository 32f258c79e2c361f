//! The checkpoint entity of the storage seam: one row per (projector,
//! tenant) holding the last position applied and the lease of the one
//! runner allowed to move it; and the [`Projector`] trait the backends
//! call inside the checkpoint's transaction ([`ProjectionTx`]), with what a
//! projector declares ([`ProjectorStrategy`]). `crate::projector`
//! re-exports them under their old paths and keeps the runner.
//!
//! Invariants every backend keeps (the contract cases in
//! `store/contract/events.rs` check each):
//!
//! - [`ProjectorStore::projector_lease_take`] succeeds only while the row's
//!   lease is free or passed (the store's clock); two takers racing: one
//!   wins.
//! - [`ProjectorStore::projector_apply`] and
//!   [`ProjectorStore::projector_rebuild`] are fenced on the lease token, on
//!   the lease not having passed and on the checkpoint still being the one
//!   the lease carries; otherwise they change nothing (the projection
//!   included, where it shares the transaction) and return
//!   [`Error::Conflict`]. Both renew the lease.
//! - The checkpoint only moves forward, except to 0 by a rebuild.
//! - Per tenant: a call under tenant A never reads or moves tenant B's
//!   rows. [`ProjectorStore::projector_checkpoints`] and
//!   [`ProjectorStore::projector_request_rebuild`] without a tenant are the
//!   system operations.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::events::Event;
use crate::tx::TxConn;
use drover_core::error::{Error, Opaque, Result};

/// What [`ProjectorStore::projector_lease_take`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseParams {
    /// The projector.
    pub projector: String,
    /// The tenant whose log it follows.
    pub tenant: Uuid,
    /// Who takes it (the worker id), for `drover projector status`.
    pub holder: String,
    /// How long the lease lasts unless renewed.
    pub lease: Duration,
}

/// A held lease: the fence every write of the runner carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectorLease {
    /// The projector.
    pub projector: String,
    /// The tenant.
    pub tenant: Uuid,
    /// The lease's token (fresh and random per take).
    pub token: Uuid,
    /// The checkpoint: the last position applied.
    pub position: i64,
    /// True when an operator asked for a rebuild that has not run yet.
    pub rebuild_requested: bool,
}

/// A checkpoint row, as `drover projector status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRow {
    /// The projector.
    pub projector: String,
    /// The tenant.
    pub tenant: Uuid,
    /// The last position applied.
    pub position: i64,
    /// The runner holding the lease, while one does.
    pub holder: Option<String>,
    /// When that lease passes.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// A rebuild is asked for and has not run yet.
    pub rebuild_requested: bool,
    /// Rebuilds run so far.
    pub rebuilds: i32,
    /// When a batch was last applied.
    pub applied_at: Option<DateTime<Utc>>,
}

/// A projector's lag over every tenant, as one aggregate read returns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectorLag {
    /// Tenants whose head is past the projector's checkpoint (a tenant
    /// without a checkpoint row counts from 0).
    pub tenants: u64,
    /// Events behind the heads, summed over those tenants.
    pub behind_events: i64,
    /// Age of the oldest retained event not applied yet, over those
    /// tenants, on the store's clock (0 when caught up).
    pub behind_seconds: f64,
}

/// The checkpoints and leases of the storage seam. Entity-then-verb; see the
/// module docs for the invariants.
///
/// The projector's name is checked above the store, once: by the runner
/// when it is built (`projector::validate`) and by `Queue::projector_request_rebuild`;
/// the backends take it as valid. [`ProjectorStore::projector_apply`] is
/// provided: it checks the events' tenant here, for every backend, and
/// calls [`ProjectorStore::projector_apply_valid`], the one a backend writes.
#[async_trait]
pub trait ProjectorStore: Send + Sync {
    /// Takes the lease of (projector, tenant), creating the row at
    /// checkpoint 0 on first use; `None` while another runner holds it.
    /// `params.projector` is a valid name (`[a-z0-9_.:-]{1,128}`).
    async fn projector_lease_take(&self, params: &LeaseParams) -> Result<Option<ProjectorLease>>;

    /// Gives the lease up (fenced on its token); a lease already lost is
    /// not an error.
    async fn projector_lease_release(&self, lease: &ProjectorLease) -> Result<()>;

    /// In one transaction (same database): moves the checkpoint from
    /// `lease.position` to the last event's position and runs
    /// `projector.apply` for each event, in order; renews the lease for
    /// `renew`. Returns the lease with the new checkpoint (and the current
    /// rebuild flag).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `events` when one is not of the lease's
    /// tenant (nothing applied); [`Error::Conflict`] when the lease is lost,
    /// passed or the checkpoint moved (nothing applied); the projector's own
    /// error (nothing applied, checkpoint unmoved).
    async fn projector_apply(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        events: &[Event],
        projector: &dyn Projector,
    ) -> Result<ProjectorLease> {
        if events.iter().any(|e| e.tenant != lease.tenant) {
            return Err(Error::invalid(
                "events",
                "every event must be of the lease's tenant",
            ));
        }
        self.projector_apply_valid(lease, renew, events, projector)
            .await
    }

    /// The backend's half of [`ProjectorStore::projector_apply`], as that
    /// method says, for `events` all of the lease's tenant (none: the lease
    /// back unchanged). Call the provided method instead; it checks first.
    ///
    /// # Errors
    /// As [`ProjectorStore::projector_apply`], but for the check.
    async fn projector_apply_valid(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        events: &[Event],
        projector: &dyn Projector,
    ) -> Result<ProjectorLease>;

    /// In one transaction: runs `projector.reset(tenant)`, moves the
    /// checkpoint to 0, clears the rebuild flag and counts the rebuild;
    /// renews the lease. Fenced as [`ProjectorStore::projector_apply`].
    async fn projector_rebuild(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        projector: &dyn Projector,
    ) -> Result<ProjectorLease>;

    /// Asks the runners of `projector` to rebuild: for `tenant`, or every
    /// tenant with a checkpoint when `None` (system operation). For one
    /// tenant the row is created if missing, so a rebuild asked before the
    /// first run is not lost. Returns the rows flagged. `projector` is a
    /// valid name.
    async fn projector_request_rebuild(&self, projector: &str, tenant: Option<Uuid>)
    -> Result<u64>;

    /// Every checkpoint row, of one projector or all, by projector then
    /// tenant (system operation).
    async fn projector_checkpoints(&self, projector: Option<&str>) -> Result<Vec<CheckpointRow>>;

    /// The runner's discovery page (system operation): tenants after
    /// `after` (by id; `None`: from the first) whose log's head is past
    /// `projector`'s checkpoint (none yet: 0) or whose rebuild is asked, at
    /// most `limit`, in tenant order. Tenants caught up are not returned, so
    /// paging on the last id returned visits every tenant with work.
    async fn projector_pending(
        &self,
        projector: &str,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Uuid>>;

    /// `projector`'s lag over every tenant in one aggregate read (system
    /// operation): the tenants behind, the events behind, and the age of
    /// the oldest event not applied yet.
    async fn projector_lag(&self, projector: &str) -> Result<ProjectorLag>;

    /// Records that a runner of `projector` is alive, on the store's clock
    /// (system operation). A projector recorded alive pins the event purge
    /// for every tenant, and its checkpoints are never forgotten.
    /// `projector` is a valid name.
    async fn projector_seen(&self, projector: &str) -> Result<()>;

    /// Retention of removed projectors (system operation): deletes the
    /// checkpoint rows, last written before `before`, of every projector no
    /// runner has recorded alive since `before`, and those projectors'
    /// records. Returns the checkpoint rows deleted. Their pin on the event
    /// purge goes with them.
    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64>;
}

/// What a projector declares about itself, as `drover handlers` prints it:
/// the four strategies every role declares (idempotency, retry,
/// checkpoint, recovery) and the two of its own (rebuild, lag). Every field
/// must say something: a blank one is refused.
///
/// The runner's own retry and recovery are the same for every projector;
/// [`ProjectorStrategy::RETRY_DEFAULT`] and
/// [`ProjectorStrategy::RECOVERY_DEFAULT`] say so and are honest to
/// declare unless the projection adds something of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectorStrategy {
    /// Why applying an event twice is harmless, or why it never happens
    /// (same database: "never applied twice: the checkpoint moves in the
    /// apply transaction"; elsewhere: the key the writes are made on).
    pub idempotency: &'static str,
    /// What happens to a batch that fails (usually
    /// [`ProjectorStrategy::RETRY_DEFAULT`]).
    pub retry: &'static str,
    /// Where the checkpoint lives and what a replay re-applies (same
    /// database: "the checkpoint commits with the projection").
    pub checkpoint: &'static str,
    /// How it comes back after a crash of its worker (usually
    /// [`ProjectorStrategy::RECOVERY_DEFAULT`]).
    pub recovery: &'static str,
    /// How its projection is rebuilt from the log (what `reset` clears) and
    /// what is lost if the log's retention has passed.
    pub rebuild: &'static str,
    /// What its lag means to a reader of the projection (how stale a read
    /// may be, what alerts on it).
    pub lag: &'static str,
}

impl ProjectorStrategy {
    /// The runner's retry, the same for every projector.
    pub const RETRY_DEFAULT: &'static str = "a batch that fails (an error or a panic in apply or \
        reset) is rolled back with its checkpoint and retried after a per-tenant backoff; an \
        event is never skipped: a poison event stalls its tenant and the lag gauge grows";
    /// The runner's recovery, the same for every projector.
    pub const RECOVERY_DEFAULT: &'static str = "a worker that dies holds its lease at most the \
        lease's length; another worker's runner then takes it and resumes from the checkpoint \
        (a batch cut off mid-way rolled back with it, or is replayed where the projection lives \
        elsewhere)";

    /// Refuses a blank field, naming it.
    ///
    /// # Errors
    /// [`Error::Config`] naming the projector and the blank strategy.
    pub fn check(&self, projector: &str) -> Result<()> {
        for (name, v) in self.fields() {
            if v.trim().is_empty() {
                return Err(Error::Config(format!(
                    "the projector {projector} declares no {name} strategy"
                )));
            }
        }
        Ok(())
    }

    /// Every field with its name, the four every role declares first.
    pub fn fields(&self) -> [(&'static str, &'static str); 6] {
        [
            ("idempotency", self.idempotency),
            ("retry", self.retry),
            ("checkpoint", self.checkpoint),
            ("recovery", self.recovery),
            ("rebuild", self.rebuild),
            ("lag", self.lag),
        ]
    }
}

/// The transaction a projector's `apply` and `reset` write in: the one the
/// checkpoint moves in, on the store's own database.
#[non_exhaustive]
pub enum ProjectionTx<'c> {
    /// A PostgreSQL transaction running as the store's login, with the
    /// login's own `search_path` (not drover's schema: a table is named as
    /// on the service's own pool). Commits with the checkpoint.
    #[cfg(feature = "postgres")]
    Postgres(&'c mut sqlx::PgConnection),
    /// The SQLite writer's transaction on the store's file. Commits with the
    /// checkpoint.
    #[cfg(feature = "sqlite")]
    Sqlite(&'c mut sqlx::SqliteConnection),
    /// No shared transaction (the memory store): the projection lives
    /// elsewhere and delivery is at least once.
    Detached,
    /// Built without either database engine, nothing borrows the
    /// connection; this uninhabited variant keeps the lifetime in use.
    #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
    #[doc(hidden)]
    Unused(
        std::marker::PhantomData<&'c mut ()>,
        std::convert::Infallible,
    ),
}

impl ProjectionTx<'_> {
    /// The PostgreSQL connection, when the store is PostgreSQL.
    #[cfg(feature = "postgres")]
    pub fn postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match self {
            ProjectionTx::Postgres(c) => Some(&mut **c),
            _ => None,
        }
    }

    /// The SQLite connection, when the store is SQLite.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(&mut self) -> Option<&mut sqlx::SqliteConnection> {
        match self {
            ProjectionTx::Sqlite(c) => Some(&mut **c),
            _ => None,
        }
    }

    /// The transaction as the engine-neutral [`TxConn`], when it is on the
    /// store's database (`None` for [`ProjectionTx::Detached`]): code that
    /// takes a `&mut TxConn<'_>` runs the same in a caller's transaction
    /// (`queue.begin()`) and in a projection, on either engine. On
    /// PostgreSQL its statements are not prepared by name (the batch may
    /// run behind a transaction pooler).
    pub fn conn(&mut self) -> Option<TxConn<'_>> {
        match self {
            #[cfg(feature = "postgres")]
            ProjectionTx::Postgres(c) => Some(TxConn::from_postgres(c, false)),
            #[cfg(feature = "sqlite")]
            ProjectionTx::Sqlite(c) => Some(TxConn::from_sqlite(c)),
            _ => None,
        }
    }

    /// True when the projection's writes commit with the checkpoint
    /// (exactly once); false for [`ProjectionTx::Detached`].
    pub fn is_shared(&self) -> bool {
        !matches!(self, ProjectionTx::Detached)
    }
}

/// Follows the event log and maintains a projection.
///
/// ```
/// use async_trait::async_trait;
/// use drover_store::events::Event;
/// use drover_store::projector::{ProjectionTx, Projector, ProjectorStrategy};
///
/// struct OrdersPerCustomer;
///
/// #[async_trait]
/// impl Projector for OrdersPerCustomer {
///     fn name(&self) -> &str { "orders_per_customer" }
///     fn topics(&self) -> Vec<String> { vec!["order_placed".into()] }
///     fn strategy(&self) -> ProjectorStrategy {
///         ProjectorStrategy {
///             idempotency: "never applied twice: the count moves in the checkpoint's transaction",
///             retry: ProjectorStrategy::RETRY_DEFAULT,
///             checkpoint: "the checkpoint commits with the counts, in the same database",
///             recovery: ProjectorStrategy::RECOVERY_DEFAULT,
///             rebuild: "reset deletes the tenant's counts; the log is replayed",
///             lag: "counts trail the log by the lag gauge; reads may be seconds stale",
///         }
///     }
///     async fn apply(&self, event: &Event, tx: &mut ProjectionTx<'_>) -> drover_core::Result<()> {
///         // One SQL text for PostgreSQL and SQLite; `None` on the memory store.
///         if let Some(mut conn) = tx.conn() {
///             conn.query("INSERT INTO orders_per_customer (customer, n) VALUES ($1, 1) \
///                         ON CONFLICT (customer) DO UPDATE SET n = orders_per_customer.n + 1")
///                 .bind(event.payload["customer"].as_str())
///                 .execute().await?;
///         }
///         Ok(())
///     }
///     async fn reset(&self, _tenant: uuid::Uuid, tx: &mut ProjectionTx<'_>) -> drover_core::Result<()> {
///         if let Some(mut conn) = tx.conn() {
///             conn.query("DELETE FROM orders_per_customer").execute().await?;
///         }
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait Projector: Send + Sync + 'static {
    /// Its name (the checkpoint's key): `[a-z0-9_.:-]{1,128}`.
    fn name(&self) -> &str;

    /// The topics it follows; empty means every topic. The checkpoint moves
    /// past events of other topics too.
    fn topics(&self) -> Vec<String>;

    /// What it declares (printed by `drover handlers`; refused if blank).
    fn strategy(&self) -> ProjectorStrategy;

    /// Applies one event, in position order, writing in `tx`.
    ///
    /// # Errors
    /// Any error rolls the whole batch back (checkpoint included); the
    /// runner retries it after a backoff and never skips it.
    async fn apply(&self, event: &Event, tx: &mut ProjectionTx<'_>) -> Result<()>;

    /// Clears the projection of `tenant` before a rebuild replays the log,
    /// in the transaction that moves the checkpoint to 0.
    ///
    /// # Errors
    /// As [`Projector::apply`]: the rebuild is retried.
    async fn reset(&self, tenant: Uuid, tx: &mut ProjectionTx<'_>) -> Result<()>;
}

/// An error for `apply` or `reset` to return when the projection refuses
/// an event for a reason of its own (the batch is rolled back and retried).
pub fn apply_failed(reason: impl Into<String>) -> Error {
    Error::Storage(Opaque::msg(reason.into()))
}
