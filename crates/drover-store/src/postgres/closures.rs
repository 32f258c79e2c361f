//! Closures on PostgreSQL (migration 0044): a closure is a rate cell keyed
//! `…@closed` whose tat is the time its scope reopens (`closures.rs` of
//! the store). Closing upserts the cell under its row lock, the lock every
//! claim that admits against it takes (`rate_cells_lock.sql`), so a claim
//! that locks it after the close committed reads the closure.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::PgStore;
use crate::closures::{Closure, ClosureStore, closure_key, parse_closure_key};
use drover_core::error::{Error, Result};

const CLOSURE_SET: &str = include_str!("../../sql/postgres/closure_set.sql");
const CLOSURE_LIST: &str = include_str!("../../sql/postgres/closure_list.sql");
const CLOSURE_REOPEN: &str = include_str!("../../sql/postgres/closure_reopen.sql");

fn closure(r: &PgRow) -> Result<Closure> {
    let key: String = r.try_get("key")?;
    let (kind, tenant_id, group) = parse_closure_key(&key)
        .ok_or_else(|| Error::invalid("closure", format!("not a closure's key: {key}")))?;
    Ok(Closure {
        kind,
        tenant_id,
        group,
        until: r.try_get("tat")?,
        closed_by: r.try_get("closed_by")?,
        closed_by_item: r.try_get("closed_by_item")?,
    })
}

impl PgStore {
    /// The closures in force (`key`: only that one); none on a schema
    /// before migration 0044.
    async fn closures_of(
        &self,
        conn: &mut sqlx::PgConnection,
        key: Option<&str>,
    ) -> Result<Vec<Closure>> {
        let rows = match sqlx::query(CLOSURE_LIST)
            .persistent(self.persistent)
            .bind(key)
            .fetch_all(conn)
            .await
        {
            Ok(rows) => rows,
            // undefined_table or undefined_column: a schema before
            // migration 0044 (a binary ahead of its database).
            Err(sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("42P01" | "42703")) =>
            {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        rows.iter().map(closure).collect()
    }
}

#[async_trait]
impl ClosureStore for PgStore {
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
        let mut tx = self.begin_system().await?;
        sqlx::query(CLOSURE_SET)
            .persistent(self.persistent)
            .bind(&key)
            .bind(until)
            .bind(actor)
            .bind(by_item)
            .execute(&mut *tx)
            .await?;
        // Every process's next claim reads the closures again.
        super::flow_gen::flow_gen_bump(&mut tx, self.persistent).await?;
        let stored = self.closures_of(&mut tx, Some(&key)).await?;
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
        let mut tx = self.begin_system().await?;
        let live: Option<bool> = sqlx::query_scalar(CLOSURE_REOPEN)
            .persistent(self.persistent)
            .bind(&key)
            .fetch_optional(&mut *tx)
            .await?;
        if live.is_some() {
            super::flow_gen::flow_gen_bump(&mut tx, self.persistent).await?;
        }
        tx.commit().await?;
        self.rates.clear();
        Ok(live.unwrap_or(false))
    }

    async fn closures(&self) -> Result<Vec<Closure>> {
        let mut tx = self.begin_system().await?;
        let out = self.closures_of(&mut tx, None).await?;
        tx.commit().await?;
        Ok(out)
    }
}
