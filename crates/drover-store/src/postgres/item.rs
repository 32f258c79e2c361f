//! [`ItemStore`] on PostgreSQL: where each item call goes. The hot path
//! (insert, claim, the fenced writes after a claim) is in `items.rs`, the
//! sweep's and the operator's statements in `ops.rs`; every statement is a
//! file of `sql/postgres/`. Per-tenant calls run under the runtime role
//! with the tenant set for their transaction, the documented cross-tenant
//! ones under the system role (see the backend module docs).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{PgStore, items, ops, rotate, row, sql};
use crate::links::LinkStore;
use crate::{
    ClaimParams, ClaimRef, CountRow, FailOutcome, FailParams, Gauges, ItemStore, ListFilter,
    StaleReport,
};
use drover_core::error::Result;
use drover_core::item::{InsertResult, Inserted, Item, NewItem};
use drover_core::rules::RetryPolicy;

#[async_trait]
impl ItemStore for PgStore {
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        self.fair_verdicts.touch();
        if item.is_linked() {
            return crate::links::one(self.links_insert(std::slice::from_ref(item)).await?);
        }
        let mut tx = self
            .begin_tenant_with(item.tenant_id, super::notifier::WAKE_AFTER_COMMIT)
            .await?;
        let inserted = items::insert_one(&mut tx, item, self.persistent).await?;
        tx.commit().await?;
        if inserted.result == InsertResult::Inserted {
            self.wake_after_commit(&item.lane);
        }
        Ok(inserted)
    }

    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        self.fair_verdicts.touch();
        if items.iter().any(NewItem::is_linked) {
            let out = self.links_insert(items).await?;
            return Ok(out.into_iter().map(|o| o.result).collect());
        }
        items::insert_many(self, items).await
    }

    async fn item_insert_each(&self, items: &[NewItem]) -> Result<Vec<Result<Inserted>>> {
        self.fair_verdicts.touch();
        if items.iter().any(NewItem::is_linked) {
            // Each request gathered here is its own enqueue.
            return crate::item::insert_each_one_by_one(self, items).await;
        }
        items::insert_each(self, items).await
    }

    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(sql::ITEM_GET)
            .persistent(self.persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(row::item).transpose()
    }

    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(sql::ITEM_GET_BY_KEY)
            .persistent(self.persistent)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(row::item).transpose()
    }

    async fn item_claim(&self, params: &ClaimParams) -> Result<Vec<Item>> {
        let items = items::claim(self, params).await?;
        self.give_back(&items).await;
        Ok(items)
    }

    async fn item_complete_with(
        &self,
        claim: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        items::complete(self, claim, result).await
    }

    async fn item_complete_many_with(&self, done: &[crate::Completion]) -> Result<Vec<Uuid>> {
        items::complete_many(self, done).await
    }

    async fn item_complete_then_claim(
        &self,
        done: &[crate::Completion],
        claim: &ClaimParams,
    ) -> Result<crate::Handover> {
        let handover = self.complete_then_claim(done, claim).await?;
        if let Ok(items) = &handover.claimed {
            self.give_back(items).await;
        }
        Ok(handover)
    }

    async fn item_progress(
        &self,
        claim: &ClaimRef,
        progress: &drover_core::item::Progress,
    ) -> Result<()> {
        items::progress(self, claim, progress).await
    }

    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome> {
        items::fail(self, claim, params).await
    }

    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        items::defer(self, claim, delay).await
    }

    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        items::release(self, claim, note).await
    }

    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>> {
        items::extend_lease(self, claim, lease).await
    }

    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()> {
        items::cancel_claimed(self, claim, note).await
    }

    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        ops::fail_orphaned(self, id, token).await
    }

    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>> {
        ops::stale_tenants(self, limit).await
    }

    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport> {
        ops::requeue_stale(self, tenant, limit, policy).await
    }

    async fn item_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        // The window follows the retention the caller purges by.
        let width = rotate::child_width(Utc::now() - before);
        rotate::purge(self, before, width, rotate::children_ahead(width), batch).await
    }

    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        ops::operator_write(self, sql::ITEM_CANCEL, "cancel", tenant, id, actor).await
    }

    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        let item = ops::operator_write(self, sql::ITEM_RETRY, "retry", tenant, id, actor).await?;
        // The statement's NOTIFY reaches other processes at commit.
        self.wake_local(&item.lane);
        Ok(item)
    }

    async fn item_list(&self, filter: &ListFilter) -> Result<Vec<Item>> {
        ops::list(self, filter).await
    }

    async fn counts(&self) -> Result<Vec<CountRow>> {
        ops::counts(self, None).await
    }

    async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        ops::counts_tenant(self, tenant).await
    }

    async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        ops::counts(self, Some(lane)).await
    }

    async fn counts_settle(&self) -> Result<u64> {
        ops::counts_settle(self).await
    }

    async fn gauges(&self) -> Result<Gauges> {
        ops::gauges(self).await
    }
}
