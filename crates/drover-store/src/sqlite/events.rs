//! The event log on SQLite (migration 0012). Every append runs under the
//! one writer's `BEGIN IMMEDIATE`, so the head an append reads is the one
//! every earlier committed write left: positions are dense and in commit
//! order, and `position > after` is gap-safe. Every per-tenant statement
//! names its tenant (SQLite has no row-level security).

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::events::{Event, EventAppended, EventHead, EventPurge, EventStore, NewEvent};
use drover_core::error::{Error, Opaque, Result};

const EVENT_HEAD_GET: &str = include_str!("../../sql/sqlite/event_head_get.sql");
const EVENT_HEAD_SET: &str = include_str!("../../sql/sqlite/event_head_set.sql");
const EVENT_FIND_ID: &str = include_str!("../../sql/sqlite/event_find_id.sql");
const EVENT_INSERT: &str = include_str!("../../sql/sqlite/event_insert.sql");
const EVENT_READ: &str = include_str!("../../sql/sqlite/event_read.sql");
const EVENT_TENANTS: &str = include_str!("../../sql/sqlite/event_tenants.sql");
const EVENT_PURGE: &str = include_str!("../../sql/sqlite/event_purge.sql");
const EVENT_PURGE_PINNED: &str = include_str!("../../sql/sqlite/event_purge_pinned.sql");

/// Events removed per purge statement, so one purge never holds the write
/// lock for long.
const PURGE_BATCH: i64 = 1_000;

/// An `events` row.
pub(super) fn event_row(r: &SqliteRow) -> Result<Event> {
    let payload: String = r.try_get("payload")?;
    Ok(Event {
        tenant: r.try_get("tenant_id")?,
        position: r.try_get("position")?,
        id: r.try_get("id")?,
        topic: r.try_get("topic")?,
        payload: serde_json::from_str(&payload).map_err(|e| {
            Error::Storage(Opaque::msg(format!(
                "stored event payload is not JSON: {e}"
            )))
        })?,
        actor: r.try_get("actor")?,
        request_id: r.try_get("request_id")?,
        traceparent: r.try_get("traceparent")?,
        created_at: from_micros(r.try_get("created_at")?)?,
    })
}

/// Appends valid events on the writer's connection inside its transaction;
/// `now` is the store's clock.
pub(super) async fn append_on(
    conn: &mut SqliteConnection,
    events: &[NewEvent],
    now: DateTime<Utc>,
) -> Result<Vec<EventAppended>> {
    let mut heads: HashMap<Uuid, i64> = HashMap::new();
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let found: Option<i64> = sqlx::query_scalar(EVENT_FIND_ID)
            .bind(e.tenant)
            .bind(e.id)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(position) = found {
            out.push(EventAppended::AlreadyThere { position });
            continue;
        }
        let head = match heads.get(&e.tenant) {
            Some(h) => *h,
            None => sqlx::query_scalar::<_, i64>(EVENT_HEAD_GET)
                .bind(e.tenant)
                .fetch_optional(&mut *conn)
                .await?
                .unwrap_or(0),
        };
        let position = head + 1;
        sqlx::query(EVENT_INSERT)
            .bind(e.tenant)
            .bind(position)
            .bind(e.id)
            .bind(&e.topic)
            .bind(e.payload.to_string())
            .bind(e.actor)
            .bind(e.request_id.as_deref())
            .bind(e.traceparent.as_deref())
            .bind(to_micros(now))
            .execute(&mut *conn)
            .await?;
        heads.insert(e.tenant, position);
        out.push(EventAppended::Appended { position });
    }
    for (tenant, head) in heads {
        sqlx::query(EVENT_HEAD_SET)
            .bind(tenant)
            .bind(head)
            .bind(to_micros(now))
            .execute(&mut *conn)
            .await?;
    }
    Ok(out)
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn event_append_valid(&self, events: &[NewEvent]) -> Result<Vec<EventAppended>> {
        if events.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        let out = append_on(&mut tx, events, self.now()).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn event_read(
        &self,
        tenant: Uuid,
        after: i64,
        topics: &[String],
        limit: u32,
    ) -> Result<Vec<Event>> {
        // SQLite has no arrays: the list is bound as JSON text. Not a check
        // of the argument (any list of strings encodes), so not lifted.
        let topics =
            serde_json::to_string(topics).map_err(|e| Error::invalid("topics", e.to_string()))?;
        let rows = sqlx::query(EVENT_READ)
            .bind(tenant)
            .bind(after)
            .bind(topics)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(event_row).collect()
    }

    async fn event_head(&self, tenant: Uuid) -> Result<EventHead> {
        let row: Option<(i64, Option<i64>)> = sqlx::query_as(EVENT_HEAD_GET)
            .bind(tenant)
            .fetch_optional(&self.reader)
            .await?;
        Ok(match row {
            Some((position, at)) => EventHead {
                position,
                at: at.map(from_micros).transpose()?,
            },
            None => EventHead {
                position: 0,
                at: None,
            },
        })
    }

    async fn event_tenants(&self, after: Option<Uuid>, limit: u32) -> Result<Vec<Uuid>> {
        Ok(sqlx::query_scalar(EVENT_TENANTS)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?)
    }

    async fn event_purge(&self, before: DateTime<Utc>) -> Result<EventPurge> {
        let mut removed = 0u64;
        loop {
            let mut tx = self.begin().await?;
            let n = sqlx::query(EVENT_PURGE)
                .bind(to_micros(before))
                .bind(PURGE_BATCH)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            removed += n;
            if n < PURGE_BATCH as u64 {
                break;
            }
        }
        let pinned: bool = sqlx::query_scalar(EVENT_PURGE_PINNED)
            .bind(to_micros(before))
            .fetch_one(&self.reader)
            .await?;
        Ok(EventPurge {
            removed,
            pinned,
            busy: false,
        })
    }
}
