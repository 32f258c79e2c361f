//! Dependencies and batches through the queue (docs/dependencies.md): the
//! typed builder's `.after(..)`, `.on_dependency_failure(..)` and
//! `.batch(..)`; a whole DAG in one call ([`Queue::enqueue_dag`], also on
//! the caller's transaction: [`Queue::enqueue_dag_in`]); batches
//! ([`Queue::batch_create`], [`Queue::batch_seal`] and the reads); and what
//! a handler may look up about its item: its dependencies' rows and typed
//! results ([`JobContext::dependencies`], [`JobContext::dependency_results`]).

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{InsertResult, Inserted, Item, NewItem, Status};
use crate::queue::{Enqueue, JobContext, Principal, Queue, Returns, Transactional};
use crate::store::links::{AfterPolicy, BatchRow, BatchWhen, ItemLinks, NewBatch};

impl<T> Enqueue<'_, T> {
    /// Waits for `deps` (items of the same tenant, enqueued before or in
    /// the same transaction): the item is claimable only once all of them
    /// are done.
    pub fn after(self, deps: impl IntoIterator<Item = Uuid>) -> Self {
        let deps: Vec<Uuid> = deps.into_iter().collect();
        self.map(|i| i.with_after(deps))
    }

    /// What a dependency that ends failed or cancelled does to this item
    /// (default [`AfterPolicy::Fail`]).
    pub fn on_dependency_failure(self, policy: AfterPolicy) -> Self {
        self.map(|i| i.with_after_policy(policy))
    }

    /// Makes the item a member of `batch` (created with
    /// [`Queue::batch_create`], not yet sealed).
    pub fn batch(self, batch: Uuid) -> Self {
        self.map(|i| i.with_batch(batch))
    }
}

/// A batch as [`Queue::batch_create`] takes it: its id, its callback's kind,
/// and the optional lane, payload and [`BatchWhen`].
#[derive(Debug, Clone)]
pub struct BatchSpec {
    new: NewBatch,
}

impl BatchSpec {
    /// A batch `id` whose callback is an item of `kind`, enqueued always.
    pub fn new(id: Uuid, kind: impl Into<String>) -> Self {
        BatchSpec {
            new: NewBatch::new(id, kind),
        }
    }

    /// The callback's lane.
    pub fn lane(mut self, lane: impl Into<String>) -> Self {
        self.new.callback_lane = lane.into();
        self
    }

    /// Carried in the callback's payload under `payload`.
    pub fn payload(mut self, payload: serde_json::Value) -> Self {
        self.new.callback_payload = payload;
        self
    }

    /// When the callback is enqueued.
    pub fn when(mut self, when: BatchWhen) -> Self {
        self.new.when = when;
        self
    }
}

impl Queue {
    fn prepare_all(&self, principal: &Principal, items: Vec<NewItem>) -> Result<Vec<NewItem>> {
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                self.prepare(principal, item).map_err(|e| match e {
                    Error::InvalidInput { field, reason } => Error::InvalidInput {
                        field,
                        reason: format!("item {i}: {reason}"),
                    },
                    e => e,
                })
            })
            .collect()
    }

    /// Enqueues a DAG in one call, atomically: every item or none. Each
    /// item's `after` may name items of the same call in any order (the
    /// caller chooses the ids: [`NewItem::with_id`]) or items stored
    /// before; `batch` names an open batch.
    ///
    /// ```
    /// # use drover::{NewItem, Queue};
    /// # async fn f() -> drover::Result<()> {
    /// let queue = Queue::memory();
    /// let fetch = NewItem::new("fetch", serde_json::json!({}));
    /// let report = NewItem::new("report", serde_json::json!({})).with_after([fetch.id]);
    /// // The dependant first: forward references are fine.
    /// queue.enqueue_dag(&drover::queue::Principal::system(), vec![report, fetch]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Queue::prepare`] (naming the item's index);
    /// [`Error::InvalidInput`] for an unknown, other tenant's or cyclic
    /// dependency or an unknown or sealed batch, with nothing written.
    ///
    /// # Cancel safety
    /// One transaction: dropped, it either committed or not.
    pub async fn enqueue_dag(
        &self,
        principal: &Principal,
        items: Vec<NewItem>,
    ) -> Result<Vec<Inserted>> {
        let prepared = self.prepare_all(principal, items)?;
        let out = self.store.links_insert(&prepared).await?;
        count_inserted(&out);
        Ok(out)
    }

    /// [`Queue::enqueue_dag`] on the caller's connection, inside the
    /// caller's transaction: the DAG exists if and only if the caller's
    /// transaction commits.
    ///
    /// # Errors
    /// As [`Queue::enqueue_dag`] and [`Queue::enqueue_item_in`].
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn enqueue_dag_in<C>(
        &self,
        conn: &mut C,
        principal: &Principal,
        items: Vec<NewItem>,
    ) -> Result<Vec<Inserted>>
    where
        C: Transactional + ?Sized,
    {
        let prepared = self.prepare_all(principal, items)?;
        let out = conn.insert_linked(self, &prepared).await?;
        count_inserted(&out);
        Ok(out)
    }

    /// Creates a batch for `principal`'s tenant: members join with
    /// `.batch(id)` (in any number of calls) until [`Queue::batch_seal`];
    /// once it is sealed and every member is final, exactly one callback
    /// item is enqueued (when its `when` holds). Creating the same batch
    /// again answers the stored one.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad callback kind, lane or payload;
    /// [`Error::Forbidden`] when the principal may not enqueue the
    /// callback's kind; [`Error::Conflict`] when the id is another batch's.
    pub async fn batch_create(&self, principal: &Principal, spec: BatchSpec) -> Result<BatchRow> {
        let mut new = spec.new;
        new.validate(self.config.max_payload_bytes)?;
        // The callback is enqueued for the creator: the same permission.
        let probe = NewItem::new(new.callback_kind.clone(), serde_json::json!({}));
        self.prepare(principal, probe)?;
        new.tenant_id = principal.tenant;
        new.created_by = principal.actor;
        self.store.batch_create(&new).await
    }

    /// Seals a batch: no more members. When every member is already final
    /// the callback decision is taken now.
    ///
    /// # Errors
    /// [`Error::NotFound`] for no such batch of the tenant.
    pub async fn batch_seal(&self, tenant: Uuid, id: Uuid) -> Result<BatchRow> {
        self.store.batch_seal(tenant, id).await
    }

    /// One batch.
    ///
    /// # Errors
    /// [`Error::NotFound`] for no such batch of the tenant.
    pub async fn batch(&self, tenant: Uuid, id: Uuid) -> Result<BatchRow> {
        self.store
            .batch_get(tenant, id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("batch {id}")))
    }

    /// The tenant's batches, newest first.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn batches(&self, tenant: Uuid, limit: u32) -> Result<Vec<BatchRow>> {
        self.store.batch_list(tenant, limit).await
    }

    /// A batch's members per current status.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn batch_members(&self, tenant: Uuid, id: Uuid) -> Result<Vec<(Status, i64)>> {
        self.store.batch_members(tenant, id).await
    }

    /// What ties item `id` to others: its dependencies, policy, how many
    /// are still open, its dependants and its batch.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn links(&self, tenant: Uuid, id: Uuid) -> Result<ItemLinks> {
        self.store.links_of(tenant, id).await
    }
}

impl Queue {
    /// The rows of the items item `id` of `tenant` waits or waited for
    /// (status and result included), ordered by id, in one read; empty for
    /// an item without dependencies.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn dependencies(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Item>> {
        self.store.links_dependencies(tenant, id).await
    }
}

impl JobContext {
    /// The items this one waited for, as they stand (every one of them is
    /// done, or finished under [`AfterPolicy::Run`], when it runs), each
    /// with its status and result. One read, made only when asked.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn dependencies(&self, queue: &Queue) -> Result<Vec<Item>> {
        queue.dependencies(self.tenant(), self.id()).await
    }

    /// The results of the dependencies of kind `K`, typed as `K` declares,
    /// by dependency id (`None` for one that returned none, or that did not
    /// end done under [`AfterPolicy::Run`]). Dependencies of other kinds
    /// are left out: read them with [`JobContext::dependencies`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a result does not decode as
    /// `K::Output`; storage errors.
    pub async fn dependency_results<K: Returns>(
        &self,
        queue: &Queue,
    ) -> Result<Vec<(Uuid, Option<K::Output>)>> {
        let deps = self.dependencies(queue).await?;
        deps.into_iter()
            .filter(|d| d.kind == K::NAME)
            .map(|d| {
                let out = d
                    .result
                    .map(|v| {
                        serde_json::from_value(v).map_err(|e| {
                            Error::invalid(
                                "result",
                                format!("of {} does not decode as {}'s output: {e}", d.id, K::NAME),
                            )
                        })
                    })
                    .transpose()?;
                Ok((d.id, out))
            })
            .collect()
    }
}

fn count_inserted(out: &[Inserted]) {
    super::counters::count_each(
        "drover_enqueued_total",
        out.iter()
            .filter(|o| o.result == InsertResult::Inserted)
            .map(|o| (o.item.lane.as_str(), o.item.kind.as_str())),
    );
}
