//! Typed enqueue builders: one item ([`Enqueue`], to the store or on the
//! caller's connection) and many ([`EnqueueBatch`]).
//!
//! Every typed path takes the kind's lane, attempt budget and enqueue
//! permission from its [`Kind`], so a typed item can never land in a lane
//! its worker does not drain by default. Every path ends in
//! [`Queue::prepare`], so the stamping, validation and permission check are
//! the ones untyped enqueues get.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{InsertResult, Inserted, NewItem};
use crate::queue::{Kind, Principal, Queue, Transactional};
use crate::rules;

/// Where an [`Enqueue`] writes: through the queue's own store.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToStore;

/// Where an [`Enqueue`] writes: on the caller's connection, inside the
/// caller's transaction (see [`Queue::enqueue_in`]).
pub struct OnConnection<'c, C: ?Sized>(&'c mut C);

impl<C: ?Sized> std::fmt::Debug for OnConnection<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnConnection(..)")
    }
}

/// The typed item a kind's job becomes: its name, lane and budget.
fn typed_item<K: Kind>(job: &K) -> Result<NewItem> {
    let payload = serde_json::to_value(job)
        .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")))?;
    let mut item = NewItem::new(K::NAME, payload)
        .with_lane(K::LANE)
        .with_max_attempts(K::MAX_ATTEMPTS);
    item.group = job.group();
    Ok(item)
}

/// A typed enqueue being built; await it to write. The same options hold
/// whether it writes through the store ([`Queue::enqueue`]) or on the
/// caller's transaction ([`Queue::enqueue_in`]).
#[must_use = "an enqueue does nothing until awaited"]
#[derive(Debug)]
pub struct Enqueue<'q, T = ToStore> {
    queue: &'q Queue,
    item: Result<NewItem>,
    principal: Principal,
    tenant_override: Option<Uuid>,
    target: T,
}

impl Queue {
    /// Starts a typed enqueue of `job` as the system principal; await it, or
    /// set options first (`.key(..)`, `.delay(..)`, `.principal(..)`).
    ///
    /// ```
    /// # use drover::queue::{Kind, Queue};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping { n: u32 }
    /// # impl Kind for Ping { const NAME: &'static str = "ping"; }
    /// # async fn f() -> drover::Result<()> {
    /// let queue = Queue::memory();
    /// let out = queue.enqueue(Ping { n: 1 }).key("ping:1").await?;
    /// # Ok(()) }
    /// ```
    pub fn enqueue<K: Kind>(&self, job: K) -> Enqueue<'_> {
        self.register_kind::<K>();
        Enqueue {
            queue: self,
            item: typed_item(&job),
            principal: Principal::system(),
            tenant_override: None,
            target: ToStore,
        }
    }

    /// Starts a typed enqueue of `job` on the caller's connection, inside
    /// the caller's transaction: the item exists if and only if the
    /// caller's transaction commits. It takes the same options as
    /// [`Queue::enqueue`] (`.key(..)`, `.delay(..)`, `.lane(..)`,
    /// `.principal(..)` …).
    ///
    /// ```no_run
    /// # use drover::queue::{Kind, Queue};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct SendReceipt { order: u64 }
    /// # impl Kind for SendReceipt { const NAME: &'static str = "send_receipt"; }
    /// # async fn f(queue: Queue, pool: sqlx::PgPool) -> drover::Result<()> {
    /// let mut tx = pool.begin().await?;
    /// // ... the caller's own writes on &mut *tx ...
    /// queue
    ///     .enqueue_in(&mut *tx, SendReceipt { order: 7 })
    ///     .key("receipt:7")
    ///     .delay(std::time::Duration::from_secs(60))
    ///     .await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Awaiting it fails with what [`Queue::prepare`] refuses;
    /// [`Error::Config`] when the connection is of another backend than the
    /// queue; database errors (the caller's transaction stays usable on
    /// PostgreSQL: the insert runs in a savepoint). Not cancel safe: drop
    /// the caller's transaction if the await is dropped.
    pub fn enqueue_in<'q, 'c, C, K>(
        &'q self,
        conn: &'c mut C,
        job: K,
    ) -> Enqueue<'q, OnConnection<'c, C>>
    where
        C: Transactional + ?Sized,
        K: Kind,
    {
        self.enqueue(job).on(conn)
    }

    /// Starts a typed batch: items of any kinds, each with its kind's lane,
    /// budget and permission, written in one statement as
    /// [`Queue::enqueue_many`] writes untyped ones.
    ///
    /// ```
    /// # use drover::queue::{Kind, Queue};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping { n: u32 }
    /// # impl Kind for Ping { const NAME: &'static str = "ping"; const LANE: &'static str = "pings"; }
    /// # async fn f() -> drover::Result<()> {
    /// let queue = Queue::memory();
    /// let results = queue
    ///     .enqueue_batch()
    ///     .extend((0..100).map(|n| Ping { n }))
    ///     .job_with(Ping { n: 100 }, |item| item.with_key("ping:100"))
    ///     .await?;
    /// assert_eq!(results.len(), 101);
    /// # Ok(()) }
    /// ```
    pub fn enqueue_batch(&self) -> EnqueueBatch<'_> {
        EnqueueBatch {
            queue: self,
            items: Vec::new(),
            error: None,
            principal: Principal::system(),
        }
    }
}

impl<'q, T> Enqueue<'q, T> {
    fn map(mut self, f: impl FnOnce(NewItem) -> NewItem) -> Self {
        self.item = self.item.map(f);
        self
    }

    /// Writes on the caller's connection, inside the caller's transaction,
    /// instead of through the store.
    pub fn on<'c, C>(self, conn: &'c mut C) -> Enqueue<'q, OnConnection<'c, C>>
    where
        C: Transactional + ?Sized,
    {
        Enqueue {
            queue: self.queue,
            item: self.item,
            principal: self.principal,
            tenant_override: self.tenant_override,
            target: OnConnection(conn),
        }
    }

    /// Sets the idempotency key.
    pub fn key(self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.map(|i| i.with_key(key))
    }

    /// Makes the key ([`Enqueue::key`]) hold only while the item is active:
    /// an enqueue of the same kind and key is refused (answering the active
    /// item, as a key collision does) only while one is pending or claimed;
    /// once it is final the next enqueue creates a new item. Awaiting fails
    /// with `InvalidInput` when no key is set.
    pub fn unique_while_active(self) -> Self {
        self.map(NewItem::with_unique_while_active)
    }

    /// Runs no earlier than `delay` from now.
    pub fn delay(self, delay: Duration) -> Self {
        let at = Utc::now() + rules::to_chrono(delay);
        self.map(|i| i.with_available_at(at))
    }

    /// Runs no earlier than `at`.
    pub fn run_at(self, at: DateTime<Utc>) -> Self {
        self.map(|i| i.with_available_at(at))
    }

    /// Sets the priority (lower runs first).
    pub fn priority(self, p: i16) -> Self {
        self.map(|i| i.with_priority(p))
    }

    /// Overrides the kind's lane.
    pub fn lane(self, lane: impl Into<String>) -> Self {
        let lane = lane.into();
        self.map(|i| i.with_lane(lane))
    }

    /// Puts the item in flow-control group `group` (overriding the one
    /// its kind derives, if any): per-group limits and ordered groups count
    /// items by kind and group.
    pub fn group(self, group: impl Into<String>) -> Self {
        let group = group.into();
        self.map(|i| i.with_group(group))
    }

    /// Overrides the kind's attempt budget.
    pub fn max_attempts(self, n: i32) -> Self {
        self.map(|i| i.with_max_attempts(n))
    }

    /// Sets the id (for producers that mint their own).
    pub fn id(self, id: Uuid) -> Self {
        self.map(|i| i.with_id(id))
    }

    /// Enqueues as `principal` (its actor, tenant, permissions, request
    /// and trace context).
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = principal;
        self
    }

    /// Enqueues into `tenant` (a system principal only).
    pub fn tenant(mut self, tenant: Uuid) -> Self {
        self.tenant_override = Some(tenant);
        self
    }

    /// The item as it would be written, after stamping and checks.
    ///
    /// # Errors
    /// As [`Queue::prepare`].
    pub fn build(self) -> Result<NewItem> {
        let (item, _) = self.finish()?;
        Ok(item)
    }

    fn finish(self) -> Result<(NewItem, T)> {
        let mut item = self.item?;
        if let Some(t) = self.tenant_override {
            item.tenant_id = t;
        }
        Ok((self.queue.prepare(&self.principal, item)?, self.target))
    }
}

impl<'q> IntoFuture for Enqueue<'q, ToStore> {
    type Output = Result<Inserted>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Inserted>> + Send + 'q>>;

    fn into_future(self) -> Self::IntoFuture {
        let queue = self.queue;
        Box::pin(async move {
            let item = self.build()?;
            let out = queue.store().item_insert(&item).await?;
            if out.result == InsertResult::Inserted {
                super::counters::count("drover_enqueued_total", &item.lane, &item.kind, 1);
            }
            Ok(out)
        })
    }
}

impl<'a, C> IntoFuture for Enqueue<'a, OnConnection<'a, C>>
where
    C: Transactional + ?Sized,
{
    type Output = Result<Inserted>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Inserted>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        let queue = self.queue;
        Box::pin(async move {
            let (item, OnConnection(conn)) = self.finish()?;
            conn.insert_prepared(queue, &item).await
        })
    }
}

/// A typed batch being built; await it to write every item in one
/// statement. One bad item refuses the whole batch and nothing is written.
#[must_use = "a batch does nothing until awaited"]
#[derive(Debug)]
pub struct EnqueueBatch<'q> {
    queue: &'q Queue,
    items: Vec<NewItem>,
    /// The first job that did not serialize, with its index.
    error: Option<Error>,
    principal: Principal,
}

impl EnqueueBatch<'_> {
    /// Adds `job` with its kind's lane and budget.
    pub fn job<K: Kind>(self, job: K) -> Self {
        self.job_with(job, |i| i)
    }

    /// Adds `job` with its kind's lane and budget, then `f`'s changes to
    /// the item (`with_key`, `with_priority`, `with_available_at` …).
    pub fn job_with<K: Kind>(mut self, job: K, f: impl FnOnce(NewItem) -> NewItem) -> Self {
        self.push_with(job, f);
        self
    }

    /// Adds every job of `jobs`.
    pub fn extend<K: Kind>(mut self, jobs: impl IntoIterator<Item = K>) -> Self {
        self.queue.register_kind::<K>();
        let jobs = jobs.into_iter();
        self.items.reserve(jobs.size_hint().0);
        for job in jobs {
            self.push_item(typed_item(&job));
        }
        self
    }

    /// Adds `job` in place (for loops).
    pub fn push<K: Kind>(&mut self, job: K) -> &mut Self {
        self.push_with(job, |i| i)
    }

    /// Adds `job` in place, then `f`'s changes to the item.
    pub fn push_with<K: Kind>(&mut self, job: K, f: impl FnOnce(NewItem) -> NewItem) -> &mut Self {
        self.queue.register_kind::<K>();
        self.push_item(typed_item(&job).map(f));
        self
    }

    fn push_item(&mut self, item: Result<NewItem>) {
        match item {
            Ok(item) => self.items.push(item),
            Err(e) if self.error.is_none() => {
                let i = self.items.len();
                self.error = Some(match e {
                    Error::InvalidInput { field, reason } => Error::InvalidInput {
                        field,
                        reason: format!("item {i}: {reason}"),
                    },
                    e => e,
                });
            }
            Err(_) => {}
        }
    }

    /// Enqueues every item as `principal`.
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = principal;
        self
    }

    /// How many items the batch holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when the batch holds no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<'q> IntoFuture for EnqueueBatch<'q> {
    type Output = Result<Vec<InsertResult>>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Vec<InsertResult>>> + Send + 'q>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            if let Some(e) = self.error {
                return Err(e);
            }
            self.queue.enqueue_many(&self.principal, self.items).await
        })
    }
}
