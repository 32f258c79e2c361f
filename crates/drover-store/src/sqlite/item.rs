//! [`ItemStore`] on SQLite: where each item call goes. Inserts are in
//! `insert.rs`, the claim and the fenced writes after it in `claim.rs`,
//! the sweep's and the operator's writes in `maint.rs`, reads in `read.rs`;
//! every write runs on the one writer connection in `BEGIN IMMEDIATE`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SqliteStore;
use crate::links::LinkStore;
use crate::{
    ClaimParams, ClaimRef, Completion, CountRow, FailOutcome, FailParams, Gauges, Handover,
    ItemStore, ListFilter, StaleReport,
};
use drover_core::error::Result;
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Progress};
use drover_core::rules::RetryPolicy;

#[async_trait]
impl ItemStore for SqliteStore {
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        if item.is_linked() {
            return crate::links::one(self.links_insert(std::slice::from_ref(item)).await?);
        }
        self.insert_one(item).await
    }

    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        if items.iter().any(NewItem::is_linked) {
            let out = self.links_insert(items).await?;
            return Ok(out.into_iter().map(|o| o.result).collect());
        }
        self.insert_many(items).await
    }

    async fn item_insert_each(&self, items: &[NewItem]) -> Result<Vec<Result<Inserted>>> {
        if items.iter().any(NewItem::is_linked) {
            // Each request gathered here is its own enqueue.
            return crate::item::insert_each_one_by_one(self, items).await;
        }
        self.insert_each(items).await
    }

    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>> {
        self.get(tenant, id).await
    }

    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>> {
        self.get_by_key(tenant, key).await
    }

    async fn item_claim(&self, params: &ClaimParams) -> Result<Vec<Item>> {
        let items = self.claim(params).await?;
        self.give_back(&items).await;
        Ok(items)
    }

    async fn item_complete_with(
        &self,
        claim: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        self.complete(claim, result).await
    }

    async fn item_complete_many_with(&self, done: &[Completion]) -> Result<Vec<Uuid>> {
        self.complete_many(done).await
    }

    async fn item_complete_then_claim(
        &self,
        done: &[Completion],
        claim: &ClaimParams,
    ) -> Result<Handover> {
        let handover = self.complete_then_claim(done, claim).await?;
        if let Ok(items) = &handover.claimed {
            self.give_back(items).await;
        }
        Ok(handover)
    }

    async fn item_progress(&self, claim: &ClaimRef, progress: &Progress) -> Result<()> {
        self.progress(claim, progress).await
    }

    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome> {
        self.fail(claim, params).await
    }

    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        self.defer(claim, delay).await
    }

    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        self.release(claim, note).await
    }

    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>> {
        self.extend_lease(claim, lease).await
    }

    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()> {
        self.cancel_claimed(claim, note).await
    }

    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        self.fail_orphaned(id, token).await
    }

    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>> {
        self.stale_tenants(limit).await
    }

    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport> {
        self.requeue_stale(tenant, limit, policy).await
    }

    async fn item_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.purge(before, batch).await
    }

    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.cancel(tenant, id, actor).await
    }

    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.retry(tenant, id, actor).await
    }

    async fn item_list(&self, filter: &ListFilter) -> Result<Vec<Item>> {
        self.list(filter).await
    }

    async fn counts(&self) -> Result<Vec<CountRow>> {
        self.read_counts(None).await
    }

    async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        self.read_counts(Some(lane)).await
    }

    async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        self.read_counts_tenant(tenant).await
    }

    async fn counts_settle(&self) -> Result<u64> {
        self.settle_counts().await
    }

    async fn gauges(&self) -> Result<Gauges> {
        self.read_gauges().await
    }
}
