//! Enqueue: one item, many items, and one item inside a caller's transaction.
//!
//! An insert never overwrites (`ON CONFLICT DO NOTHING`); on a collision the
//! tenant's own row is read back in the same transaction and reported as
//! `IdExists` (checked first) or `KeyExists`; an id held only by another
//! tenant's item is `Conflict` (single) or `IdTaken` (bulk), never that row. The stored copy is stamped
//! pending, unclaimed, with no attempt spent, whatever the caller sent.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, to_micros};
use super::sql;
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, Inserted, NewItem};

/// Rows per multi-row `INSERT`: 15 parameters each stays far below SQLite's
/// 32,766-parameter limit, and one fixed size keeps the prepared statement
/// cached across batches.
const ROWS_PER_STATEMENT: usize = 1000;

fn payload_text(item: &NewItem) -> Result<String> {
    serde_json::to_string(&item.payload)
        .map_err(|e| Error::Storage(Opaque::msg(format!("payload does not serialize: {e}"))))
}

/// The single-item insert on any connection (the store's writer or a
/// caller's transaction); the collision read-back runs on the same
/// connection, so it sees the row that blocked the insert.
pub(super) async fn insert_on(
    conn: &mut SqliteConnection,
    item: &NewItem,
    now: DateTime<Utc>,
) -> Result<Inserted> {
    let inserted = sqlx::query(sql::ITEM_INSERT)
        .bind(item.id)
        .bind(item.tenant_id)
        .bind(&item.kind)
        .bind(&item.lane)
        .bind(payload_text(item)?)
        .bind(item.priority)
        .bind(to_micros(item.available_at.unwrap_or(now)))
        .bind(item.max_attempts)
        .bind(item.stored_key())
        .bind(item.created_by)
        .bind(item.request_id.as_deref())
        .bind(item.traceparent.as_deref())
        .bind(to_micros(item.created_at))
        .bind(to_micros(now))
        .bind(item.group.as_deref())
        .bind(item.active_key())
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(r) = inserted {
        return Ok(Inserted {
            result: InsertResult::Inserted,
            item: row::item(&r)?,
        });
    }
    if let Some(r) = sqlx::query(sql::ITEM_GET)
        .bind(item.tenant_id)
        .bind(item.id)
        .fetch_optional(&mut *conn)
        .await?
    {
        return Ok(Inserted {
            result: InsertResult::IdExists,
            item: row::item(&r)?,
        });
    }
    if let Some(key) = item.stored_key()
        && let Some(r) = sqlx::query(sql::ITEM_GET_BY_KEY)
            .bind(item.tenant_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?
    {
        return Ok(Inserted {
            result: InsertResult::KeyExists,
            item: row::item(&r)?,
        });
    }
    if let Some(key) = item.active_key()
        && let Some(r) = sqlx::query(sql::ITEM_GET_ACTIVE)
            .bind(item.tenant_id)
            .bind(&item.kind)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?
    {
        return Ok(Inserted {
            result: InsertResult::KeyExists,
            item: row::item(&r)?,
        });
    }
    if id_exists(conn, item.id).await? {
        // Neither the tenant's own id nor its key: the id belongs to another
        // tenant's item. Say so without handing that item across the tenant
        // boundary (the rule of every backend, store module docs).
        return Err(Error::Conflict(format!(
            "item id {} is already in use",
            item.id
        )));
    }
    Err(Error::Storage(Opaque::msg(format!(
        "insert of item {} wrote nothing and no colliding row was found",
        item.id
    ))))
}

async fn id_exists(conn: &mut SqliteConnection, id: Uuid) -> Result<bool> {
    Ok(sqlx::query_scalar(sql::ITEM_ID_EXISTS)
        .bind(id)
        .fetch_one(&mut *conn)
        .await?)
}

/// Why a bulk input did not land, by the rule of every backend: the
/// tenant's own id, then its own key, then an id of another tenant. Reads
/// the open transaction, so rows an earlier input of the batch wrote count.
async fn collision(conn: &mut SqliteConnection, item: &NewItem) -> Result<InsertResult> {
    let holder: Option<Uuid> = sqlx::query_scalar(sql::ITEM_ID_TENANT)
        .bind(item.id)
        .fetch_optional(&mut *conn)
        .await?;
    if holder == Some(item.tenant_id) {
        return Ok(InsertResult::IdExists);
    }
    if let Some(key) = item.active_key()
        && sqlx::query(sql::ITEM_GET_ACTIVE)
            .bind(item.tenant_id)
            .bind(&item.kind)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?
            .is_some()
    {
        return Ok(InsertResult::KeyExists);
    }
    if let Some(key) = item.stored_key() {
        let own_key: Option<Uuid> = sqlx::query_scalar(sql::ITEM_EXISTS_KEY)
            .bind(item.tenant_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
        if own_key.is_some() {
            return Ok(InsertResult::KeyExists);
        }
    }
    match holder {
        Some(_) => Ok(InsertResult::IdTaken),
        None => Err(Error::Storage(Opaque::msg(format!(
            "bulk insert of item {} wrote nothing and no colliding row was found",
            item.id
        )))),
    }
}

/// The multi-row statement for `n` rows, returning the landed rows'
/// identities or nothing.
fn insert_many_sql(n: usize, returning: bool) -> String {
    let mut rows = String::with_capacity(n * (sql::ITEM_INSERT_ROW.len() + 2));
    for i in 0..n {
        if i > 0 {
            rows.push_str(",\n");
        }
        rows.push_str(sql::ITEM_INSERT_ROW.trim());
    }
    let returning = if returning {
        sql::ITEM_INSERT_MANY_RETURNING.trim()
    } else {
        ""
    };
    sql::ITEM_INSERT_MANY
        .replace("{rows}", &rows)
        .replace("{returning}", returning)
}

/// Binds one chunk's items to a multi-row statement.
fn bind_chunk<'q>(
    statement: &'q str,
    items: &'q [NewItem],
    now: DateTime<Utc>,
) -> Result<sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>> {
    let now_us = to_micros(now);
    let mut q = sqlx::query(statement);
    for item in items {
        q = q
            .bind(item.id)
            .bind(item.tenant_id)
            .bind(item.kind.as_str())
            .bind(item.lane.as_str())
            .bind(payload_text(item)?)
            .bind(item.priority)
            .bind(to_micros(item.available_at.unwrap_or(now)))
            .bind(item.max_attempts)
            .bind(item.stored_key())
            .bind(item.created_by)
            .bind(item.request_id.as_deref())
            .bind(item.traceparent.as_deref())
            .bind(to_micros(item.created_at))
            .bind(now_us)
            .bind(item.created_by)
            .bind(item.group.as_deref())
            .bind(item.active_key());
    }
    Ok(q)
}

/// Inserts one chunk in the open transaction; returns per-input results.
///
/// The fast path inserts without `RETURNING` (streaming a row back per item
/// costs more than the insert itself) and is done when every row landed. On
/// a collision the chunk is rolled back to its savepoint and run again
/// returning the rows that land, to tell each input's fate.
async fn insert_chunk(
    conn: &mut SqliteConnection,
    items: &[NewItem],
    now: DateTime<Utc>,
) -> Result<Vec<InsertResult>> {
    sqlx::query(sql::SAVEPOINT_BEGIN)
        .execute(&mut *conn)
        .await?;
    let fast = insert_many_sql(items.len(), false);
    let n = bind_chunk(&fast, items, now)?
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if n == items.len() as u64 {
        sqlx::query(sql::SAVEPOINT_RELEASE)
            .execute(&mut *conn)
            .await?;
        return Ok(vec![InsertResult::Inserted; items.len()]);
    }
    sqlx::query(sql::SAVEPOINT_ROLLBACK)
        .execute(&mut *conn)
        .await?;
    let slow = insert_many_sql(items.len(), true);
    let landed = bind_chunk(&slow, items, now)?.fetch_all(&mut *conn).await?;
    sqlx::query(sql::SAVEPOINT_RELEASE)
        .execute(&mut *conn)
        .await?;
    // id -> (tenant, key) of each row written by this statement. An input
    // landed iff its whole identity matches a written row not yet taken by
    // an earlier, identical input (SQLite inserts VALUES in order, so the
    // first of two identical inputs is the one that landed).
    type Written = (Uuid, Option<String>, Option<String>);
    let mut written: HashMap<Uuid, Written> = HashMap::with_capacity(landed.len());
    for r in &landed {
        written.insert(
            r.try_get("id")?,
            (
                r.try_get("tenant_id")?,
                r.try_get("idempotency_key")?,
                r.try_get("active_key")?,
            ),
        );
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mine = written.get(&item.id).is_some_and(|(t, k, a)| {
            *t == item.tenant_id
                && k.as_deref() == item.stored_key()
                && a.as_deref() == item.active_key()
        });
        if mine {
            written.remove(&item.id);
            out.push(InsertResult::Inserted);
        } else {
            out.push(collision(conn, item).await?);
        }
    }
    Ok(out)
}

impl SqliteStore {
    pub(super) async fn insert_one(&self, item: &NewItem) -> Result<Inserted> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let out = insert_on(&mut tx, item, now).await?;
        tx.commit().await?;
        if out.result == InsertResult::Inserted {
            self.wake_lanes([out.item.lane.as_str()]);
        }
        Ok(out)
    }

    /// Independent inserts on the one writer transaction, each answered as
    /// [`SqliteStore::insert_one`] would answer it (one commit for all).
    pub(super) async fn insert_each(&self, items: &[NewItem]) -> Result<Vec<Result<Inserted>>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let now = self.now();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match insert_on(&mut tx, item, now).await {
                Err(e) if !e.is_conflict() => return Err(e),
                other => out.push(other),
            }
        }
        tx.commit().await?;
        self.wake_lanes(out.iter().filter_map(|o| match o {
            Ok(ins) if ins.result == InsertResult::Inserted => Some(ins.item.lane.as_str()),
            _ => None,
        }));
        Ok(out)
    }

    pub(super) async fn insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let now = self.now();
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(ROWS_PER_STATEMENT) {
            out.extend(insert_chunk(&mut tx, chunk, now).await?);
        }
        tx.commit().await?;
        let lanes = items
            .iter()
            .zip(&out)
            .filter(|(_, r)| **r == InsertResult::Inserted)
            .map(|(i, _)| i.lane.as_str());
        self.wake_lanes(lanes);
        Ok(out)
    }
}
