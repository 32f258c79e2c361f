//! [`LinkStore`] on PostgreSQL: the linked enqueue (items, then the marks,
//! edges, counts and batch members of [`links::write_plan`], in one
//! transaction) and the batch and link reads. The release of dependants
//! and the batch counters run in the `items_linked_final` trigger
//! (migration 0039), in the statement that finishes a linked item.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

use super::items::{enter_caller_tx, insert_one, leave_caller_tx};
use super::{PgStore, row, validate_schema};
use crate::links::{
    self, BatchCounts, BatchRow, ItemLinks, LinkCensus, LinkPlan, LinkStore, NewBatch, as_inserted,
};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Status};

const LINKS_MARK: &str = include_str!("../../sql/postgres/links_mark.sql");
const LINKS_EDGES: &str = include_str!("../../sql/postgres/links_edges.sql");
const LINKS_RELEASE: &str = include_str!("../../sql/postgres/links_release.sql");
const LINKS_FAIL: &str = include_str!("../../sql/postgres/links_fail.sql");
const LINKS_JOIN: &str = include_str!("../../sql/postgres/links_join.sql");
const LINKS_OF: &str = include_str!("../../sql/postgres/links_of.sql");
const LINKS_DEPENDENCIES: &str = include_str!("../../sql/postgres/links_dependencies.sql");
const BATCH_CREATE: &str = include_str!("../../sql/postgres/batch_create.sql");
const BATCH_SEAL: &str = include_str!("../../sql/postgres/batch_seal.sql");
const BATCH_GET: &str = include_str!("../../sql/postgres/batch_get.sql");
const BATCH_LIST: &str = include_str!("../../sql/postgres/batch_list.sql");
const BATCH_MEMBERS: &str = include_str!("../../sql/postgres/batch_members.sql");
const LINKS_CENSUS: &str = include_str!("../../sql/postgres/links_census.sql");

/// A linked enqueue inside the caller's transaction on `conn` (a savepoint
/// of it): all of `items` or none, and only if the caller commits.
///
/// # Errors
/// As [`LinkStore::links_insert`]; [`Error::InvalidInput`] for a bad
/// schema name. On an error the savepoint is rolled back.
///
/// # Cancel safety
/// As [`super::insert_in`].
pub async fn links_insert_in(
    conn: &mut PgConnection,
    schema: &str,
    items: &[NewItem],
) -> Result<Vec<Inserted>> {
    validate_schema(schema)?;
    let plan = links::plan(items)?;
    let mut sp = conn.begin().await?;
    let saved = enter_caller_tx(&mut sp, schema, plan.tenant).await?;
    let out = write(&mut sp, items, &plan, false).await?;
    leave_caller_tx(&mut sp, saved).await?;
    sp.commit().await?;
    Ok(out)
}

/// The linked enqueue on a connection under the runtime role and the
/// plan's tenant.
async fn write(
    conn: &mut PgConnection,
    items: &[NewItem],
    plan: &LinkPlan,
    persistent: bool,
) -> Result<Vec<Inserted>> {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        out.push(insert_one(conn, &as_inserted(it), persistent).await?);
    }
    let inserted: Vec<bool> = out
        .iter()
        .map(|o| o.result == InsertResult::Inserted)
        .collect();
    let mark = links::to_mark(items, &inserted, plan);
    let mut status = HashMap::with_capacity(mark.len());
    if !mark.is_empty() {
        let rows = sqlx::query(LINKS_MARK)
            .persistent(persistent)
            .bind(&mark)
            .fetch_all(&mut *conn)
            .await?;
        for r in rows {
            let st: String = r.try_get("status")?;
            status.insert(r.try_get::<Uuid, _>("id")?, row::status(&st)?);
        }
    }
    let w = links::write_plan(items, &inserted, plan, &status)?;
    for (batch, members) in &w.members {
        let joined = sqlx::query(LINKS_JOIN)
            .persistent(persistent)
            .bind(plan.tenant)
            .bind(batch)
            .bind(members)
            .fetch_optional(&mut *conn)
            .await?;
        if joined.is_none() {
            return Err(Error::invalid(
                "batch",
                format!("{batch} is not an open batch of this tenant"),
            ));
        }
    }
    if !w.edges.is_empty() {
        sqlx::query(LINKS_EDGES)
            .persistent(persistent)
            .bind(plan.tenant)
            .bind(w.edges.iter().map(|e| e.0).collect::<Vec<_>>())
            .bind(w.edges.iter().map(|e| e.1).collect::<Vec<_>>())
            .bind(
                w.edges
                    .iter()
                    .map(|e| e.2.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(w.edges.iter().map(|e| e.3).collect::<Vec<_>>())
            .bind(w.waits.iter().map(|x| x.0).collect::<Vec<_>>())
            .bind(w.waits.iter().map(|x| x.1).collect::<Vec<_>>())
            .bind(w.waits.iter().map(|x| x.2).collect::<Vec<_>>())
            .execute(&mut *conn)
            .await?;
    }
    if !w.release.is_empty() {
        sqlx::query(LINKS_RELEASE)
            .persistent(persistent)
            .bind(&w.release)
            .execute(&mut *conn)
            .await?;
    }
    if !w.fail.is_empty() {
        sqlx::query(LINKS_FAIL)
            .persistent(persistent)
            .bind(w.fail.iter().map(|f| f.0).collect::<Vec<_>>())
            .bind(w.fail.iter().map(|f| f.1.clone()).collect::<Vec<_>>())
            .execute(&mut *conn)
            .await?;
    }
    // The rows as they stand after the writes above (released, failed).
    let mut fresh = Vec::with_capacity(out.len());
    for o in out {
        if o.result == InsertResult::Inserted && items_changed(&w, o.item.id) {
            let r = sqlx::query(super::sql::ITEM_GET)
                .persistent(persistent)
                .bind(o.item.id)
                .fetch_one(&mut *conn)
                .await?;
            fresh.push(Inserted {
                result: o.result,
                item: row::item(&r)?,
            });
        } else {
            fresh.push(o);
        }
    }
    Ok(fresh)
}

fn items_changed(w: &links::LinkWrite, id: Uuid) -> bool {
    w.release.contains(&id) || w.fail.iter().any(|f| f.0 == id)
}

fn batch_row(r: &PgRow) -> Result<BatchRow> {
    let when: String = r.try_get("fire_when")?;
    Ok(BatchRow {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        callback_kind: r.try_get("callback_kind")?,
        callback_lane: r.try_get("callback_lane")?,
        callback_payload: r.try_get("callback_payload")?,
        when: when
            .parse()
            .map_err(|_| Error::Storage(Opaque::msg(format!("unknown batch when {when:?}"))))?,
        callback_id: r.try_get("callback_id")?,
        sealed: r.try_get("sealed")?,
        fired: r.try_get("fired")?,
        total: r.try_get("total")?,
        counts: BatchCounts {
            done: r.try_get("done")?,
            failed: r.try_get("failed")?,
            cancelled: r.try_get("cancelled")?,
        },
        created_at: r.try_get::<DateTime<Utc>, _>("created_at")?,
    })
}

#[async_trait]
impl LinkStore for PgStore {
    async fn links_insert(&self, items: &[NewItem]) -> Result<Vec<Inserted>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let plan = links::plan(items)?;
        let mut tx = self.begin_tenant(plan.tenant).await?;
        let out = write(&mut tx, items, &plan, self.persistent).await?;
        tx.commit().await?;
        for o in &out {
            if o.result == InsertResult::Inserted && !links::is_waiting_at(o.item.available_at) {
                self.wake_local(&o.item.lane);
            }
        }
        Ok(out)
    }

    async fn links_of(&self, tenant: Uuid, id: Uuid) -> Result<ItemLinks> {
        let mut tx = self.begin_tenant(tenant).await?;
        let r = sqlx::query(LINKS_OF)
            .persistent(self.persistent)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let policy: Option<String> = r.try_get("policy")?;
        Ok(ItemLinks {
            after: r.try_get("after")?,
            after_policy: policy.map(|p| p.parse()).transpose()?,
            waiting_on: r
                .try_get::<Option<i32>, _>("waiting_on")?
                .unwrap_or(0)
                .into(),
            dependants: r.try_get("dependants")?,
            batch: r.try_get("batch")?,
        })
    }

    async fn links_dependencies(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Item>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(LINKS_DEPENDENCIES)
            .persistent(self.persistent)
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(row::item).collect()
    }

    async fn batch_create(&self, b: &NewBatch) -> Result<BatchRow> {
        let mut tx = self.begin_tenant(b.tenant_id).await?;
        let created = sqlx::query(BATCH_CREATE)
            .persistent(self.persistent)
            .bind(b.tenant_id)
            .bind(b.id)
            .bind(&b.callback_kind)
            .bind(&b.callback_lane)
            .bind(&b.callback_payload)
            .bind(b.when.as_str())
            .bind(b.callback_id)
            .bind(b.created_by)
            .fetch_optional(&mut *tx)
            .await?;
        let row = match created {
            Some(r) => batch_row(&r)?,
            None => {
                let r = sqlx::query(BATCH_GET)
                    .persistent(self.persistent)
                    .bind(b.tenant_id)
                    .bind(b.id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| Error::Conflict(format!("batch id {} is in use", b.id)))?;
                batch_row(&r)?
            }
        };
        tx.commit().await?;
        links::same_batch(b, row)
    }

    async fn batch_seal(&self, tenant: Uuid, id: Uuid) -> Result<BatchRow> {
        let mut tx = self.begin_tenant(tenant).await?;
        let sealed = sqlx::query(BATCH_SEAL)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if sealed.is_none() {
            return Err(Error::NotFound(format!("batch {id}")));
        }
        let r = sqlx::query(BATCH_GET)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        batch_row(&r)
    }

    async fn batch_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<BatchRow>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let r = sqlx::query(BATCH_GET)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        r.as_ref().map(batch_row).transpose()
    }

    async fn batch_list(&self, tenant: Uuid, limit: u32) -> Result<Vec<BatchRow>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(BATCH_LIST)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(batch_row).collect()
    }

    async fn batch_members(&self, tenant: Uuid, id: Uuid) -> Result<Vec<(Status, i64)>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(BATCH_MEMBERS)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let st: String = r.try_get("status")?;
                Ok((row::status(&st)?, r.try_get::<i64, _>("n")?))
            })
            .collect()
    }

    async fn links_census(&self) -> Result<LinkCensus> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(LINKS_CENSUS)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(LinkCensus {
            edges: r.try_get("edges")?,
            waits: r.try_get("waits")?,
            members: r.try_get("members")?,
            batches: r.try_get("batches")?,
        })
    }
}
