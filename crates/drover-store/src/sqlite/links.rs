//! [`LinkStore`] on SQLite: the linked enqueue on the one writer (or a
//! savepoint of the caller's transaction), executing
//! [`links::write_plan`]; the release of dependants and the batch counters
//! run in the `items_linked_final` trigger (migration 0039), in the
//! statement that finishes a linked item.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::insert::insert_on;
use super::row::{from_micros, status, to_micros};
use crate::links::{
    self, BatchCounts, BatchRow, ItemLinks, LinkCensus, LinkPlan, LinkStore, NewBatch, as_inserted,
};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Status};

const LINKS_MARK: &str = include_str!("../../sql/sqlite/links_mark.sql");
const LINKS_EDGE: &str = include_str!("../../sql/sqlite/links_edge.sql");
const LINKS_WAIT: &str = include_str!("../../sql/sqlite/links_wait.sql");
const LINKS_RELEASE: &str = include_str!("../../sql/sqlite/links_release.sql");
const LINKS_FAIL: &str = include_str!("../../sql/sqlite/links_fail.sql");
const LINKS_JOIN: &str = include_str!("../../sql/sqlite/links_join.sql");
const LINKS_MEMBER: &str = include_str!("../../sql/sqlite/links_member.sql");
const LINKS_DEPS_OF: &str = include_str!("../../sql/sqlite/links_deps_of.sql");
const LINKS_DEPENDANTS_OF: &str = include_str!("../../sql/sqlite/links_dependants_of.sql");
const LINKS_WAIT_OF: &str = include_str!("../../sql/sqlite/links_wait_of.sql");
const BATCH_CREATE: &str = include_str!("../../sql/sqlite/batch_create.sql");
const BATCH_SEAL: &str = include_str!("../../sql/sqlite/batch_seal.sql");
const BATCH_GET: &str = include_str!("../../sql/sqlite/batch_get.sql");
const BATCH_LIST: &str = include_str!("../../sql/sqlite/batch_list.sql");
const BATCH_MEMBERS: &str = include_str!("../../sql/sqlite/batch_members.sql");
const ITEM_GET: &str = include_str!("../../sql/sqlite/item_get.sql");
const LINKS_DEPENDENCIES: &str = include_str!("../../sql/sqlite/links_dependencies.sql");
const LINKS_CENSUS: &str = include_str!("../../sql/sqlite/links_census.sql");

/// A linked enqueue inside the caller's transaction on `conn` (in a
/// savepoint of it): all of `items` or none, and only if the caller
/// commits. `now` is the store's time ([`SqliteStore::now`]).
///
/// # Errors
/// As [`LinkStore::links_insert`]. On an error the savepoint is rolled
/// back, so the caller's transaction stays usable.
pub async fn links_insert_in(
    conn: &mut SqliteConnection,
    items: &[NewItem],
    now: DateTime<Utc>,
) -> Result<Vec<Inserted>> {
    let plan = links::plan(items)?;
    // The caller's connection may not have been opened by the store: a
    // dead-lettered dependant must finish its own dependants in turn.
    sqlx::query("PRAGMA recursive_triggers = ON")
        .execute(&mut *conn)
        .await?;
    let mut sp = conn.begin().await?;
    let out = write(&mut sp, items, &plan, now).await?;
    sp.commit().await?;
    Ok(out)
}

async fn write(
    conn: &mut SqliteConnection,
    items: &[NewItem],
    plan: &LinkPlan,
    now: DateTime<Utc>,
) -> Result<Vec<Inserted>> {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        out.push(insert_on(conn, &as_inserted(it), now).await?);
    }
    let inserted: Vec<bool> = out
        .iter()
        .map(|o| o.result == InsertResult::Inserted)
        .collect();
    let mut marked = HashMap::new();
    for id in links::to_mark(items, &inserted, plan) {
        let st: Option<String> = sqlx::query_scalar(LINKS_MARK)
            .bind(plan.tenant)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(st) = st {
            marked.insert(id, status(&st)?);
        }
    }
    let w = links::write_plan(items, &inserted, plan, &marked)?;
    for (batch, members) in &w.members {
        let joined = sqlx::query(LINKS_JOIN)
            .bind(plan.tenant)
            .bind(batch)
            .bind(i64::try_from(members.len()).unwrap_or(i64::MAX))
            .fetch_optional(&mut *conn)
            .await?;
        if joined.is_none() {
            return Err(Error::invalid(
                "batch",
                format!("{batch} is not an open batch of this tenant"),
            ));
        }
        for m in members {
            sqlx::query(LINKS_MEMBER)
                .bind(plan.tenant)
                .bind(m)
                .bind(batch)
                .execute(&mut *conn)
                .await?;
        }
    }
    for (dep, item, policy, resolved) in &w.edges {
        sqlx::query(LINKS_EDGE)
            .bind(plan.tenant)
            .bind(dep)
            .bind(item)
            .bind(policy.as_str())
            .bind(i64::from(*resolved))
            .execute(&mut *conn)
            .await?;
    }
    for (item, left, run_at) in &w.waits {
        sqlx::query(LINKS_WAIT)
            .bind(plan.tenant)
            .bind(item)
            .bind(left)
            .bind(run_at.map(to_micros))
            .execute(&mut *conn)
            .await?;
    }
    for id in &w.release {
        sqlx::query(LINKS_RELEASE)
            .bind(plan.tenant)
            .bind(id)
            .bind(to_micros(now))
            .execute(&mut *conn)
            .await?;
    }
    for (id, err) in &w.fail {
        sqlx::query(LINKS_FAIL)
            .bind(plan.tenant)
            .bind(id)
            .bind(err)
            .bind(to_micros(now))
            .bind(Uuid::nil())
            .execute(&mut *conn)
            .await?;
    }
    let mut fresh = Vec::with_capacity(out.len());
    for o in out {
        if o.result == InsertResult::Inserted
            && (w.release.contains(&o.item.id) || w.fail.iter().any(|f| f.0 == o.item.id))
        {
            let r = sqlx::query(ITEM_GET)
                .bind(plan.tenant)
                .bind(o.item.id)
                .fetch_one(&mut *conn)
                .await?;
            fresh.push(Inserted {
                result: o.result,
                item: super::row::item(&r)?,
            });
        } else {
            fresh.push(o);
        }
    }
    Ok(fresh)
}

fn batch_row(r: &SqliteRow) -> Result<BatchRow> {
    let when: String = r.try_get("fire_when")?;
    let payload: String = r.try_get("callback_payload")?;
    Ok(BatchRow {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        callback_kind: r.try_get("callback_kind")?,
        callback_lane: r.try_get("callback_lane")?,
        callback_payload: serde_json::from_str(&payload)
            .map_err(|e| Error::Storage(Opaque::msg(format!("batch payload: {e}"))))?,
        when: when.parse()?,
        callback_id: r.try_get("callback_id")?,
        sealed: r.try_get::<i64, _>("sealed")? != 0,
        fired: r.try_get::<i64, _>("fired")? != 0,
        total: r.try_get("total")?,
        counts: BatchCounts {
            done: r.try_get("done")?,
            failed: r.try_get("failed")?,
            cancelled: r.try_get("cancelled")?,
        },
        created_at: from_micros(r.try_get("created_at")?)?,
    })
}

#[async_trait]
impl LinkStore for SqliteStore {
    async fn links_insert(&self, items: &[NewItem]) -> Result<Vec<Inserted>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let plan = links::plan(items)?;
        let mut tx = self.begin().await?;
        let out = write(&mut tx, items, &plan, self.now()).await?;
        tx.commit().await?;
        self.wake_lanes(out.iter().filter_map(|o| {
            (o.result == InsertResult::Inserted && !links::is_waiting_at(o.item.available_at))
                .then_some(o.item.lane.as_str())
        }));
        Ok(out)
    }

    async fn links_of(&self, tenant: Uuid, id: Uuid) -> Result<ItemLinks> {
        let deps = sqlx::query(LINKS_DEPS_OF)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        let dependants: Vec<Uuid> = sqlx::query_scalar(LINKS_DEPENDANTS_OF)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        let w = sqlx::query(LINKS_WAIT_OF)
            .bind(tenant)
            .bind(id)
            .fetch_one(&self.reader)
            .await?;
        let mut links = ItemLinks {
            dependants,
            waiting_on: w.try_get::<Option<i64>, _>("waiting_on")?.unwrap_or(0),
            batch: w.try_get("batch")?,
            ..ItemLinks::default()
        };
        for r in deps {
            links.after.push(r.try_get("dep_id")?);
            let p: String = r.try_get("policy")?;
            links.after_policy = Some(p.parse()?);
        }
        Ok(links)
    }

    async fn links_dependencies(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Item>> {
        let rows = sqlx::query(LINKS_DEPENDENCIES)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(super::row::item).collect()
    }

    async fn batch_create(&self, b: &NewBatch) -> Result<BatchRow> {
        let payload = serde_json::to_string(&b.callback_payload)
            .map_err(|e| Error::Storage(Opaque::msg(format!("batch payload: {e}"))))?;
        let mut tx = self.begin().await?;
        let created = sqlx::query(BATCH_CREATE)
            .bind(b.tenant_id)
            .bind(b.id)
            .bind(&b.callback_kind)
            .bind(&b.callback_lane)
            .bind(payload)
            .bind(b.when.as_str())
            .bind(b.callback_id)
            .bind(b.created_by)
            .bind(to_micros(self.now()))
            .fetch_optional(&mut *tx)
            .await?;
        let row = match created {
            Some(r) => batch_row(&r)?,
            None => {
                let r = sqlx::query(BATCH_GET)
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
        let mut tx = self.begin().await?;
        let sealed = sqlx::query(BATCH_SEAL)
            .bind(tenant)
            .bind(id)
            .bind(to_micros(self.now()))
            .fetch_optional(&mut *tx)
            .await?;
        if sealed.is_none() {
            return Err(Error::NotFound(format!("batch {id}")));
        }
        let r = sqlx::query(BATCH_GET)
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let row = batch_row(&r)?;
        if row.fired {
            self.wake_lanes([row.callback_lane.as_str()]);
        }
        Ok(row)
    }

    async fn batch_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<BatchRow>> {
        let r = sqlx::query(BATCH_GET)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        r.as_ref().map(batch_row).transpose()
    }

    async fn batch_list(&self, tenant: Uuid, limit: u32) -> Result<Vec<BatchRow>> {
        let rows = sqlx::query(BATCH_LIST)
            .bind(tenant)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(batch_row).collect()
    }

    async fn batch_members(&self, tenant: Uuid, id: Uuid) -> Result<Vec<(Status, i64)>> {
        let rows = sqlx::query(BATCH_MEMBERS)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                let st: String = r.try_get("status")?;
                Ok((status(&st)?, r.try_get::<i64, _>("n")?))
            })
            .collect()
    }

    async fn links_census(&self) -> Result<LinkCensus> {
        let r = sqlx::query(LINKS_CENSUS).fetch_one(&self.reader).await?;
        census(&r)
    }
}

/// A census row (`links_census.sql`).
fn census(r: &SqliteRow) -> Result<LinkCensus> {
    Ok(LinkCensus {
        edges: r.try_get("edges")?,
        waits: r.try_get("waits")?,
        members: r.try_get("members")?,
        batches: r.try_get("batches")?,
    })
}
