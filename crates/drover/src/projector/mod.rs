//! Projectors: code that follows the event log ([`crate::events`]) in
//! position order and keeps a projection (a read model) up to date, with a
//! checkpoint per (projector, tenant).
//!
//! # What this module owns
//!
//! The [`Projector`] trait and its declared [`ProjectorStrategy`], the
//! transaction handed to `apply` ([`ProjectionTx`]), the storage seam of the
//! checkpoints and their leases ([`ProjectorStore`], in `store.rs`), and the
//! runner the worker starts beside its claim loop ([`ProjectorRunner`], in
//! `runner.rs`).
//!
//! # Invariants
//!
//! - **Exactly once when the projection shares the database.** On PostgreSQL
//!   and SQLite, [`ProjectorStore::projector_apply`] moves the checkpoint
//!   (fenced on the runner's lease token, on the lease not having passed on
//!   the database clock, and on the checkpoint being where the runner read
//!   it) and runs `apply` for every event of the batch **in one
//!   transaction**: a crash rolls back both, so no event is applied twice
//!   or skipped, and the checkpoint is never ahead of the projection.
//! - **At least once otherwise.** A projection kept elsewhere (another
//!   database, a search index, the memory store's [`ProjectionTx::Detached`])
//!   is written before the checkpoint commits; a crash between the two
//!   replays the batch, so `apply` must be idempotent there (key the writes
//!   on `event.id` or `event.position`).
//! - **One runner per (projector, tenant) across the fleet**: a lease row on
//!   the database clock, taken only when free or passed, renewed by every
//!   batch; a runner that lost it gets [`Error::Conflict`] and stops.
//! - **Never skip**: a batch whose `apply` fails (an error, or a panic the
//!   runner contains) is rolled back and retried after a per-tenant
//!   backoff; the projector stalls on a poison event (its lag gauge and
//!   `drover_projector_failing_tenants` grow, `/healthz` names it) rather
//!   than pass it, and its other tenants go on.
//! - **Every tenant**: a pass pages through every tenant behind its head;
//!   the retention purge never removes an event a known projector (one with
//!   a checkpoint row anywhere, or recorded alive) has not passed, a tenant
//!   without a checkpoint row of its own counting as position 0.
//! - **Rebuild** (`drover projector rebuild NAME`) sets a flag on the
//!   checkpoint rows; the runner holding the lease then calls
//!   [`Projector::reset`] and moves the checkpoint to 0 in one transaction,
//!   and replays the retained log while new events keep arriving behind it.

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::{Error, Opaque, Result};
use crate::events::Event;

mod as_service;
mod runner;
mod store;

pub use runner::{
    PROJECTOR_BACKOFF_BASE_DEFAULT, PROJECTOR_BACKOFF_CAP_DEFAULT, PROJECTOR_BATCH_DEFAULT,
    PROJECTOR_BATCH_MAX, PROJECTOR_BATCH_SQLITE_DEFAULT, PROJECTOR_INTERVAL_DEFAULT,
    PROJECTOR_LEASE_DEFAULT, PROJECTOR_MAX_BATCHES_DEFAULT, PROJECTOR_MAX_BATCHES_MAX,
    PROJECTOR_TENANT_PAGE_DEFAULT, PROJECTOR_TENANT_PAGE_MAX, ProjectorConfig, ProjectorReport,
    ProjectorRunner, TenantStatus, status,
};
pub use store::{CheckpointRow, LeaseParams, ProjectorLag, ProjectorLease, ProjectorStore};

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
    fn fields(&self) -> [(&'static str, &'static str); 6] {
        [
            ("idempotency", self.idempotency),
            ("retry", self.retry),
            ("checkpoint", self.checkpoint),
            ("recovery", self.recovery),
            ("rebuild", self.rebuild),
            ("lag", self.lag),
        ]
    }

    /// The strategies as `drover handlers` lists a role's (role
    /// `projector`): the four every role declares, then rebuild and lag.
    pub fn as_role(&self, projector: &str) -> crate::worker::RoleInfo {
        crate::worker::RoleInfo {
            role: "projector".into(),
            name: projector.into(),
            strategies: self
                .fields()
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }
}

/// The transaction a projector's `apply` and `reset` write in: the one the
/// checkpoint moves in, on the store's own database.
#[non_exhaustive]
pub enum ProjectionTx<'c> {
    /// A PostgreSQL transaction running as the store's login (its role and
    /// `search_path` as the pool opened it: qualify the projection's tables
    /// by schema). Commits with the checkpoint.
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
/// use drover::events::Event;
/// use drover::projector::{ProjectionTx, Projector, ProjectorStrategy};
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
///     async fn apply(&self, event: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
///         if let Some(conn) = tx.sqlite() {
///             sqlx::query("INSERT INTO orders_per_customer (customer, n) VALUES (?1, 1) \
///                          ON CONFLICT (customer) DO UPDATE SET n = n + 1")
///                 .bind(event.payload["customer"].as_str())
///                 .execute(conn).await?;
///         }
///         Ok(())
///     }
///     async fn reset(&self, _tenant: uuid::Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
///         if let Some(conn) = tx.sqlite() {
///             sqlx::query("DELETE FROM orders_per_customer").execute(conn).await?;
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

/// Checks a projector's name and strategy, as the worker does before
/// starting its runner.
///
/// # Errors
/// [`Error::InvalidInput`] on `projector` for a bad name; [`Error::Config`]
/// for a blank strategy.
pub fn validate(p: &dyn Projector) -> Result<()> {
    crate::item::validate_kind(p.name()).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid("projector", reason),
        other => other,
    })?;
    for t in p.topics() {
        crate::item::validate_kind(&t).map_err(|e| match e {
            Error::InvalidInput { reason, .. } => Error::invalid("topic", reason),
            other => other,
        })?;
    }
    p.strategy().check(p.name())
}
