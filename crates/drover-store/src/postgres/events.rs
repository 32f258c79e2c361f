//! The event log on PostgreSQL (migration 0012).
//!
//! Appends run under the runtime role scoped to each event's tenant and take
//! the tenant's `event_heads` row lock before handing out positions; the
//! lock lasts until the appending transaction ends, so positions are dense
//! and in commit order and `event_read.sql`'s `position > $2` is gap-safe.
//! Appends of several tenants in one transaction lock their heads in tenant
//! order, so two such batches cannot deadlock. The purge (system role)
//! rotates the ring of four children and truncates the oldest one; it never
//! deletes row by row. Every appender touches every child (the idempotent
//! append's id lookup reads them all), so the purge takes the oldest
//! child's ACCESS EXCLUSIVE lock first, waiting at most a short
//! `lock_timeout`, and only then checks the pin and counts: a long appender
//! or reader makes the purge skip its pass instead of queueing every later
//! append behind the waiting lock request.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Acquire, PgConnection, Row};
use uuid::Uuid;

use super::items::{enter_caller_tx, leave_caller_tx};
use super::{PgStore, switch_tenant, validate_schema};
use crate::events::{
    Event, EventAppended, EventHead, EventPurge, EventStore, NewEvent, validate_all,
};
use drover_core::error::{Error, Result};

const EVENT_HEAD_ENSURE: &str = include_str!("../../sql/postgres/event_head_ensure.sql");
const EVENT_HEAD_LOCK: &str = include_str!("../../sql/postgres/event_head_lock.sql");
const EVENT_FIND_IDS: &str = include_str!("../../sql/postgres/event_find_ids.sql");
const EVENT_INSERT_MANY: &str = include_str!("../../sql/postgres/event_insert_many.sql");
const EVENT_HEAD_SET: &str = include_str!("../../sql/postgres/event_head_set.sql");
const EVENT_READ: &str = include_str!("../../sql/postgres/event_read.sql");
const EVENT_HEAD: &str = include_str!("../../sql/postgres/event_head.sql");
const EVENT_TENANTS: &str = include_str!("../../sql/postgres/event_tenants.sql");
const EVENT_SLOTS_LOCK: &str = include_str!("../../sql/postgres/event_slots_lock.sql");
const EVENT_SLOT_PINNED: &str = include_str!("../../sql/postgres/event_slot_pinned.sql");
const EVENT_SLOT_COUNT: &str = include_str!("../../sql/postgres/event_slot_count.sql");
const EVENT_SLOT_TRUNCATE: &str = include_str!("../../sql/postgres/event_slot_truncate.sql");
const EVENT_SLOT_CLOSE: &str = include_str!("../../sql/postgres/event_slot_close.sql");
const EVENT_SLOT_OPEN: &str = include_str!("../../sql/postgres/event_slot_open.sql");
const EVENT_LOCK_TIMEOUT: &str = include_str!("../../sql/postgres/event_lock_timeout.sql");
const EVENT_SLOT_LOCK: &str = include_str!("../../sql/postgres/event_slot_lock.sql");

/// Whether `e` is PostgreSQL's `lock_not_available` (the lock timeout).
fn lock_timed_out(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some("55P03"))
}

/// How one rotation attempt of the event ring ended.
enum Rotation {
    /// Nothing due: the transaction changed nothing.
    NotDue,
    /// A lock was not granted within the lock timeout: skip this pass.
    Busy,
    /// Pinned (nothing changed) or truncated (commit).
    Done(EventPurge),
}

/// The children of the ring (migration 0012).
const SLOTS: i16 = 4;

/// An `events` row.
pub(super) fn event_row(r: &PgRow) -> Result<Event> {
    Ok(Event {
        tenant: r.try_get("tenant_id")?,
        position: r.try_get("position")?,
        id: r.try_get("id")?,
        topic: r.try_get("topic")?,
        payload: r.try_get("payload")?,
        actor: r.try_get("actor")?,
        request_id: r.try_get("request_id")?,
        traceparent: r.try_get("traceparent")?,
        created_at: r.try_get("created_at")?,
    })
}

/// Takes the tenant's head row lock; `None` before its first append.
async fn lock_head(conn: &mut PgConnection, tenant: Uuid, persistent: bool) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(EVENT_HEAD_LOCK)
        .persistent(persistent)
        .bind(tenant)
        .fetch_optional(conn)
        .await?)
}

/// Appends one tenant's events on a connection already under the runtime
/// role scoped to `tenant`, inside a transaction (or savepoint) that holds
/// the head lock until it ends.
async fn append_tenant(
    conn: &mut PgConnection,
    tenant: Uuid,
    events: &[&NewEvent],
    persistent: bool,
) -> Result<Vec<EventAppended>> {
    let mut head = match lock_head(&mut *conn, tenant, persistent).await? {
        Some(h) => h,
        None => {
            // First append of the tenant: racing first appenders both insert,
            // one row lands, and both then queue on its lock.
            sqlx::query(EVENT_HEAD_ENSURE)
                .persistent(persistent)
                .bind(tenant)
                .execute(&mut *conn)
                .await?;
            lock_head(&mut *conn, tenant, persistent)
                .await?
                .ok_or_else(|| {
                    Error::Storage(drover_core::error::Opaque::msg(
                        "the tenant's event head row vanished under its lock",
                    ))
                })?
        }
    };
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let mut known: HashMap<Uuid, i64> = sqlx::query_as::<_, (Uuid, i64)>(EVENT_FIND_IDS)
        .persistent(persistent)
        .bind(tenant)
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .collect();
    let mut out = Vec::with_capacity(events.len());
    let (mut pos, mut id, mut topic, mut payload, mut actor, mut req, mut tp) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for e in events {
        if let Some(&p) = known.get(&e.id) {
            out.push(EventAppended::AlreadyThere { position: p });
            continue;
        }
        head += 1;
        known.insert(e.id, head);
        out.push(EventAppended::Appended { position: head });
        pos.push(head);
        id.push(e.id);
        topic.push(e.topic.as_str());
        payload.push(&e.payload);
        actor.push(e.actor);
        req.push(e.request_id.as_deref());
        tp.push(e.traceparent.as_deref());
    }
    if !pos.is_empty() {
        sqlx::query(EVENT_INSERT_MANY)
            .persistent(persistent)
            .bind(tenant)
            .bind(&pos)
            .bind(&id)
            .bind(&topic)
            .bind(&payload)
            .bind(&actor)
            .bind(&req)
            .bind(&tp)
            .execute(&mut *conn)
            .await?;
        sqlx::query(EVENT_HEAD_SET)
            .persistent(persistent)
            .bind(tenant)
            .bind(head)
            .execute(&mut *conn)
            .await?;
    }
    Ok(out)
}

/// The events grouped by tenant, tenants in order (the head locks' order),
/// each with the indexes of its events in the caller's slice.
fn by_tenant(events: &[NewEvent]) -> Vec<(Uuid, Vec<usize>)> {
    let mut groups: std::collections::BTreeMap<Uuid, Vec<usize>> = Default::default();
    for (i, e) in events.iter().enumerate() {
        groups.entry(e.tenant).or_default().push(i);
    }
    groups.into_iter().collect()
}

/// Appends events inside the caller's own transaction on PostgreSQL (as
/// `insert_in` enqueues): they exist if and only if the caller commits, and
/// each tenant's head stays locked until then, so keep the transaction
/// short after this call. `schema` is the drover schema.
///
/// # Errors
/// [`Error::InvalidInput`] for a bad schema name or event (nothing is
/// written); database errors.
///
/// # Cancel safety
/// Not cancel safe on its own: a dropped call leaves a savepoint for the
/// caller's transaction to roll back, as any dropped statement does.
pub async fn append_in(
    conn: &mut PgConnection,
    schema: &str,
    events: &[NewEvent],
) -> Result<Vec<EventAppended>> {
    // A public entry of its own, beside the provided appends of
    // `EventStore`: it checks the events by the same rule, and the schema
    // name it splices into `search_path`, a PostgreSQL-only argument.
    validate_schema(schema)?;
    validate_all(events)?;
    let groups = by_tenant(events);
    let Some((first, _)) = groups.first() else {
        return Ok(vec![]);
    };
    let mut sp = conn.begin().await?;
    let saved = enter_caller_tx(&mut sp, schema, *first).await?;
    let mut out = vec![EventAppended::Appended { position: 0 }; events.len()];
    for (tenant, idx) in &groups {
        switch_tenant(&mut sp, *tenant).await?;
        let batch: Vec<&NewEvent> = idx.iter().map(|&i| &events[i]).collect();
        for (i, r) in idx
            .iter()
            .zip(append_tenant(&mut sp, *tenant, &batch, false).await?)
        {
            out[*i] = r;
        }
    }
    leave_caller_tx(&mut sp, saved).await?;
    sp.commit().await?;
    Ok(out)
}

/// Appends validated `events`, grouped by [`by_tenant`] into `groups`, on
/// an open transaction, each tenant's head locked in tenant order until the
/// transaction ends. `switch`: the transaction runs under the runtime role,
/// so each tenant after the first is set for it; under the system role (the
/// relay's batch) every statement names its tenant itself.
async fn append_groups(
    tx: &mut PgConnection,
    events: &[NewEvent],
    groups: &[(Uuid, Vec<usize>)],
    persistent: bool,
    switch: bool,
) -> Result<Vec<EventAppended>> {
    let mut out = vec![EventAppended::Appended { position: 0 }; events.len()];
    for (n, (tenant, idx)) in groups.iter().enumerate() {
        if n > 0 && switch {
            switch_tenant(&mut *tx, *tenant).await?;
        }
        let batch: Vec<&NewEvent> = idx.iter().map(|&i| &events[i]).collect();
        let got = append_tenant(&mut *tx, *tenant, &batch, persistent).await?;
        for (i, r) in idx.iter().zip(got) {
            out[*i] = r;
        }
    }
    Ok(out)
}

/// Appends events on the relay's system-role transaction (every statement
/// names the event's tenant): the events exist if and only if that
/// transaction commits. The events are valid already: `RelayPlan::of`
/// checks each against the event log's bound and refuses a bad one alone.
///
/// # Errors
/// Database errors.
pub(super) async fn append_system(
    tx: &mut PgConnection,
    events: &[NewEvent],
    persistent: bool,
) -> Result<Vec<EventAppended>> {
    let groups = by_tenant(events);
    append_groups(tx, events, &groups, persistent, false).await
}

#[async_trait]
impl EventStore for PgStore {
    async fn event_append_valid(&self, events: &[NewEvent]) -> Result<Vec<EventAppended>> {
        let groups = by_tenant(events);
        let Some((first, _)) = groups.first() else {
            return Ok(vec![]);
        };
        let mut tx = self.begin_tenant(*first).await?;
        let out = append_groups(&mut tx, events, &groups, self.persistent, true).await?;
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
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(EVENT_READ)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(after)
            .bind(topics)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(event_row).collect()
    }

    async fn event_head(&self, tenant: Uuid) -> Result<EventHead> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row: Option<(i64, Option<DateTime<Utc>>)> = sqlx::query_as(EVENT_HEAD)
            .persistent(self.persistent)
            .bind(tenant)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(row.map_or(
            EventHead {
                position: 0,
                at: None,
            },
            |(position, at)| EventHead { position, at },
        ))
    }

    async fn event_tenants(&self, after: Option<Uuid>, limit: u32) -> Result<Vec<Uuid>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query_scalar(EVENT_TENANTS)
            .persistent(self.persistent)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn event_purge(&self, before: DateTime<Utc>) -> Result<EventPurge> {
        let mut tx = self.begin_system().await?;
        match self.purge_locked(&mut tx, before).await? {
            Rotation::Done(purged) if purged.removed > 0 || !purged.pinned => {
                tx.commit().await?;
                Ok(purged)
            }
            Rotation::Done(pinned) => {
                tx.rollback().await?;
                Ok(pinned)
            }
            Rotation::NotDue => {
                tx.rollback().await?;
                Ok(EventPurge::default())
            }
            Rotation::Busy => {
                // A long appender or reader holds the oldest child (or
                // another purge the ring): skip this pass rather than queue
                // every appender behind a waiting ACCESS EXCLUSIVE.
                tx.rollback().await?;
                tracing::debug!("event purge skipped: its lock is held by a long transaction");
                Ok(EventPurge {
                    busy: true,
                    ..EventPurge::default()
                })
            }
        }
    }
}

impl PgStore {
    /// One rotation of the event ring on the system-role transaction `tx`
    /// (see the module docs): not due; busy when a lock was not granted
    /// within `event_lock_timeout.sql`'s bound (SQLSTATE 55P03: the
    /// transaction is then aborted, for the caller to roll back); pinned
    /// when a known projector has not passed the oldest child; otherwise the
    /// oldest child truncated and made current. The pin and the count are
    /// read under the child's lock, so they hold until the truncation.
    async fn purge_locked(&self, tx: &mut PgConnection, before: DateTime<Utc>) -> Result<Rotation> {
        sqlx::query(EVENT_LOCK_TIMEOUT)
            .persistent(self.persistent)
            .execute(&mut *tx)
            .await?;
        let slots: Vec<PgRow> = match sqlx::query(EVENT_SLOTS_LOCK)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await
        {
            Ok(rows) => rows,
            Err(e) if lock_timed_out(&e) => return Ok(Rotation::Busy),
            Err(e) => return Err(e.into()),
        };
        let mut current = None;
        let mut opened = HashMap::new();
        let mut closed = HashMap::new();
        let mut now = None;
        for r in &slots {
            let slot: i16 = r.try_get("slot")?;
            if r.try_get::<bool, _>("current")? {
                current = Some(slot);
            }
            opened.insert(slot, r.try_get::<Option<DateTime<Utc>>, _>("opened_at")?);
            closed.insert(slot, r.try_get::<Option<DateTime<Utc>>, _>("closed_at")?);
            now = Some(r.try_get::<DateTime<Utc>, _>("now")?);
        }
        let (Some(current), Some(now)) = (current, now) else {
            return Err(Error::Storage(drover_core::error::Opaque::msg(
                "the event ring has no current child (migration 0012 not applied?)",
            )));
        };
        let oldest = (current + 1) % SLOTS;
        // The current child is closed once it has been current for a third
        // of the retention, so the four children span about the retention
        // and a third: the oldest is past it when the next rotation is due.
        let retention = now - before;
        let due = opened
            .get(&current)
            .copied()
            .flatten()
            .is_none_or(|at| at + retention / 3 <= now);
        let oldest_expired = closed
            .get(&oldest)
            .copied()
            .flatten()
            .is_none_or(|at| at < before);
        if !due || !oldest_expired {
            return Ok(Rotation::NotDue);
        }
        // `oldest` is 0..=3 from the ring's own CHECK: an integer is safe to
        // splice, and LOCK and TRUNCATE take no parameters.
        let lock = EVENT_SLOT_LOCK.replace("{slot}", &oldest.to_string());
        match sqlx::query(&lock).persistent(false).execute(&mut *tx).await {
            Ok(_) => {}
            Err(e) if lock_timed_out(&e) => return Ok(Rotation::Busy),
            Err(e) => return Err(e.into()),
        }
        let pinned: bool = sqlx::query_scalar(EVENT_SLOT_PINNED)
            .persistent(self.persistent)
            .bind(oldest)
            .fetch_one(&mut *tx)
            .await?;
        if pinned {
            return Ok(Rotation::Done(EventPurge {
                pinned: true,
                ..EventPurge::default()
            }));
        }
        let removed: i64 = sqlx::query_scalar(EVENT_SLOT_COUNT)
            .persistent(self.persistent)
            .bind(oldest)
            .fetch_one(&mut *tx)
            .await?;
        let truncate = EVENT_SLOT_TRUNCATE.replace("{slot}", &oldest.to_string());
        sqlx::query(&truncate)
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        sqlx::query(EVENT_SLOT_CLOSE)
            .persistent(self.persistent)
            .execute(&mut *tx)
            .await?;
        sqlx::query(EVENT_SLOT_OPEN)
            .persistent(self.persistent)
            .bind(oldest)
            .execute(&mut *tx)
            .await?;
        Ok(Rotation::Done(EventPurge {
            removed: u64::try_from(removed).unwrap_or(0),
            ..EventPurge::default()
        }))
    }
}
