//! Closures on SQLite (migration 0044): a closure is a rate cell keyed
//! `…@closed` whose tat is the time its scope reopens (`closures.rs` of
//! the store), written on the single writer, so a claim after the close
//! reads it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::closures::{Closure, ClosureStore, closure_key, parse_closure_key};
use drover_core::error::{Error, Result};

const CLOSURE_SET: &str = include_str!("../../sql/sqlite/closure_set.sql");
const CLOSURE_LIST: &str = include_str!("../../sql/sqlite/closure_list.sql");
const CLOSURE_REOPEN: &str = include_str!("../../sql/sqlite/closure_reopen.sql");

fn closure(r: &SqliteRow) -> Result<Closure> {
    let key: String = r.try_get("key")?;
    let (kind, tenant_id, group) = parse_closure_key(&key)
        .ok_or_else(|| Error::invalid("closure", format!("not a closure's key: {key}")))?;
    Ok(Closure {
        kind,
        tenant_id,
        group,
        until: from_micros(r.try_get("tat")?)?,
        closed_by: r.try_get("closed_by")?,
        closed_by_item: r.try_get("closed_by_item")?,
    })
}

/// The closures ahead of `now` (`key`: only that one); none on a schema
/// before migration 0044.
pub(super) async fn closures_on<'c, E>(
    conn: E,
    now: DateTime<Utc>,
    key: Option<&str>,
) -> Result<Vec<Closure>>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    let rows = match sqlx::query(CLOSURE_LIST)
        .bind(to_micros(now))
        .bind(key)
        .fetch_all(conn)
        .await
    {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e))
            if e.message().contains("no such column") || e.message().contains("no such table") =>
        {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    rows.iter().map(closure).collect()
}

#[async_trait]
impl ClosureStore for SqliteStore {
    async fn close_until(
        &self,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
        until: DateTime<Utc>,
        by_item: Option<Uuid>,
        actor: Uuid,
    ) -> Result<Closure> {
        let key = closure_key(kind, tenant, group);
        let mut tx = self.begin().await?;
        let now = self.now();
        sqlx::query(CLOSURE_SET)
            .bind(&key)
            .bind(to_micros(until))
            .bind(actor)
            .bind(by_item)
            .bind(to_micros(now))
            .execute(&mut *tx)
            .await?;
        // Every process's next claim reads the closures again.
        super::flow_gen::flow_gen_bump(&mut tx).await?;
        let stored = closures_on(&mut *tx, now, Some(&key)).await?;
        tx.commit().await?;
        self.rates.clear();
        Ok(stored.into_iter().next().unwrap_or(Closure {
            kind: kind.to_owned(),
            tenant_id: tenant,
            group: group.map(str::to_owned),
            until,
            closed_by: actor,
            closed_by_item: by_item,
        }))
    }

    async fn reopen(&self, kind: &str, tenant: Uuid, group: Option<&str>) -> Result<bool> {
        let key = closure_key(kind, tenant, group);
        let mut tx = self.begin().await?;
        let live: Option<bool> = sqlx::query_scalar(CLOSURE_REOPEN)
            .bind(&key)
            .bind(to_micros(self.now()))
            .fetch_optional(&mut *tx)
            .await?;
        if live.is_some() {
            super::flow_gen::flow_gen_bump(&mut tx).await?;
        }
        tx.commit().await?;
        self.rates.clear();
        Ok(live.unwrap_or(false))
    }

    async fn closures(&self) -> Result<Vec<Closure>> {
        closures_on(&self.reader, self.now(), None).await
    }
}
