//! Orchestration records and signals on SQLite.
//!
//! Every write runs in one `BEGIN IMMEDIATE` transaction on the single
//! writer, so the step item's fenced completion, the record's
//! compare-and-set, the signal's consumption and the next item's insert
//! land together, and a signal and a park never interleave. An operator's
//! cancel request is a write on the same writer, so a step's transition
//! either sees it (and turns into compensation in its transaction) or
//! commits first.
//!
//! A transition's step item that is not inserted (its id or key held by
//! another item) fails the transaction: no record is left without its item.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::claim::{SYSTEM, refused};
use super::row::{from_micros, to_micros};
use super::{SqliteStore, insert, sql};
use crate::ClaimRef;
use crate::orchestration::transition::{
    cancel_due, cancel_requested, parks_for_signal, wake_on_signal,
};
use crate::orchestration::{
    DeadStep, NewOrchestration, Orchestration, OrchestrationFilter, OrchestrationInserted,
    OrchestrationStatus, OrchestrationStore, Signal, SignalOutcome, Transition,
};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, NewItem};

fn json_err(what: &str, e: serde_json::Error) -> Error {
    Error::Storage(Opaque::msg(format!("stored {what} is not valid JSON: {e}")))
}

fn to_json<T: serde::Serialize>(what: &str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| json_err(what, e))
}

fn record(row: &SqliteRow) -> Result<Orchestration> {
    let parse = |col: &str| -> Result<serde_json::Value> {
        let s: String = row.try_get(col)?;
        serde_json::from_str(&s).map_err(|e| json_err(col, e))
    };
    let result: Option<String> = row.try_get("result")?;
    let completed: String = row.try_get("completed")?;
    let history: String = row.try_get("history")?;
    let resume_as: Option<String> = row.try_get("resume_as")?;
    let parked: Option<i64> = row.try_get("parked_until")?;
    let status: String = row.try_get("status")?;
    Ok(Orchestration {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: row.try_get("kind")?,
        lane: row.try_get("lane")?,
        max_attempts: row.try_get("max_attempts")?,
        status: OrchestrationStatus::parse(&status)
            .map_err(|e| Error::Storage(Opaque::msg(e.to_string())))?,
        step: row.try_get("step")?,
        state: parse("state")?,
        version: row.try_get("version")?,
        parked_until: parked.map(from_micros).transpose()?,
        waiting_for: row.try_get("waiting_for")?,
        timeout_step: row.try_get("timeout_step")?,
        completed: serde_json::from_str(&completed).map_err(|e| json_err("completed", e))?,
        history: serde_json::from_str(&history).map_err(|e| json_err("history", e))?,
        history_dropped: row.try_get("history_dropped")?,
        result: result
            .map(|s| serde_json::from_str(&s).map_err(|e| json_err("result", e)))
            .transpose()?,
        error: row.try_get("error")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        resume_as: resume_as
            .map(|s| OrchestrationStatus::parse(&s))
            .transpose()
            .map_err(|e| Error::Storage(Opaque::msg(e.to_string())))?,
        idempotency_key: row.try_get("idempotency_key")?,
        created_at: from_micros(row.try_get("created_at")?)?,
        updated_at: from_micros(row.try_get("updated_at")?)?,
    })
}

fn signal(row: &SqliteRow) -> Result<Signal> {
    let payload: String = row.try_get("payload")?;
    let consumed: Option<i64> = row.try_get("consumed_at")?;
    Ok(Signal {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        orchestration_id: row.try_get("orchestration_id")?,
        name: row.try_get("name")?,
        payload: serde_json::from_str(&payload).map_err(|e| json_err("payload", e))?,
        idempotency_key: row.try_get("idempotency_key")?,
        consumed_at: consumed.map(from_micros).transpose()?,
        created_at: from_micros(row.try_get("created_at")?)?,
    })
}

async fn get(conn: &mut SqliteConnection, tenant: Uuid, id: Uuid) -> Result<Option<Orchestration>> {
    let row = sqlx::query(sql::ORCHESTRATION_GET)
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(record).transpose()
}

/// The compare-and-set with what rides along; `Conflict` on a stale version.
async fn apply(
    conn: &mut SqliteConnection,
    t: &Transition,
    now: DateTime<Utc>,
) -> Result<Orchestration> {
    let w = &t.write;
    let row = sqlx::query(sql::ORCHESTRATION_UPDATE)
        .bind(t.tenant_id)
        .bind(t.id)
        .bind(t.expected_version)
        .bind(w.status.as_str())
        .bind(&w.step)
        .bind(to_json("state", &w.state)?)
        .bind(w.parked_until.map(to_micros))
        .bind(w.waiting_for.as_deref())
        .bind(w.timeout_step.as_deref())
        .bind(to_json("completed", &w.completed)?)
        .bind(to_json("history", &w.history)?)
        .bind(
            w.result
                .as_ref()
                .map(|r| to_json("result", r))
                .transpose()?,
        )
        .bind(w.error.as_deref())
        .bind(i64::from(w.cancel_requested))
        .bind(w.resume_as.map(|s| s.as_str()))
        .bind(to_micros(now))
        .bind(w.history_dropped)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Err(match get(conn, t.tenant_id, t.id).await? {
            Some(r) => Error::Conflict(format!(
                "orchestration {}: version {} expected, {} stored",
                t.id, t.expected_version, r.version
            )),
            None => Error::NotFound(format!("orchestration {}", t.id)),
        });
    };
    let r = record(&row)?;
    if let Some(sid) = t.consume_signal {
        sqlx::query(sql::ORCHESTRATION_SIGNAL_CONSUME)
            .bind(t.tenant_id)
            .bind(sid)
            .bind(to_micros(now))
            .execute(&mut *conn)
            .await?;
    }
    // A cancel request on the record: the follow-up transition inserts the
    // compensation's item instead of this one.
    if let Some(item) = t.enqueue.as_ref().filter(|_| !cancel_due(&r)) {
        inserted(insert::insert_on(conn, item, now).await?.result, item)?;
    }
    Ok(r)
}

/// `Conflict` unless the step item was inserted: a key or id held by
/// another item must fail the transition, not leave the record without its
/// item. The transaction is then dropped, rolling back everything.
fn inserted(result: InsertResult, item: &NewItem) -> Result<()> {
    if result == InsertResult::Inserted {
        return Ok(());
    }
    Err(Error::Conflict(format!(
        "the step item {} could not be inserted ({result:?}, key {:?})",
        item.id, item.idempotency_key
    )))
}

async fn pending(
    conn: &mut SqliteConnection,
    r: &Orchestration,
    name: &str,
) -> Result<Option<Signal>> {
    let row = sqlx::query(sql::ORCHESTRATION_SIGNAL_PENDING)
        .bind(r.tenant_id)
        .bind(r.id)
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(signal).transpose()
}

/// `apply`, then a park for a signal already waiting becomes its wake-up.
async fn apply_and_match(
    conn: &mut SqliteConnection,
    t: &Transition,
    now: DateTime<Utc>,
) -> Result<Orchestration> {
    let r = apply(conn, t, now).await?;
    if cancel_due(&r) {
        return apply(conn, &cancel_requested(&r, now), now).await;
    }
    if let Some(name) = parks_for_signal(t)
        && let Some(sig) = pending(conn, &r, name).await?
    {
        return apply(conn, &wake_on_signal(&r, &sig, now), now).await;
    }
    Ok(r)
}

/// Starts an orchestration on `conn` (the store's writer in its own
/// transaction, or the caller's transaction): the record and its first
/// item, or on a collision the existing record and nothing written. In the
/// caller's transaction they exist if and only if the caller commits; call
/// [`SqliteStore::notify`] with the lane after committing.
///
/// # Errors
/// As [`OrchestrationStore::orchestration_insert`].
///
/// # Cancel safety
/// Runs inside the given transaction: a dropped call leaves it to the
/// caller to roll back or commit.
pub async fn start_in(
    conn: &mut SqliteConnection,
    new: &NewOrchestration,
    first: &NewItem,
    now: DateTime<Utc>,
) -> Result<OrchestrationInserted> {
    if let Some(row) = sqlx::query(sql::ORCHESTRATION_GET_ANY)
        .bind(new.id)
        .fetch_optional(&mut *conn)
        .await?
    {
        let r = record(&row)?;
        if r.tenant_id != new.tenant_id {
            return Err(Error::Conflict(format!(
                "orchestration id {} is taken",
                new.id
            )));
        }
        return Ok(OrchestrationInserted {
            result: InsertResult::IdExists,
            record: r,
        });
    }
    if let Some(key) = &new.idempotency_key
        && let Some(row) = sqlx::query(sql::ORCHESTRATION_GET_BY_KEY)
            .bind(new.tenant_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?
    {
        return Ok(OrchestrationInserted {
            result: InsertResult::KeyExists,
            record: record(&row)?,
        });
    }
    let row = sqlx::query(sql::ORCHESTRATION_INSERT)
        .bind(new.id)
        .bind(new.tenant_id)
        .bind(&new.kind)
        .bind(&new.lane)
        .bind(new.max_attempts)
        .bind(&new.step)
        .bind(to_json("state", &new.state)?)
        .bind(new.idempotency_key.as_deref())
        .bind(to_micros(now))
        .fetch_one(&mut *conn)
        .await?;
    let r = record(&row)?;
    inserted(insert::insert_on(conn, first, now).await?.result, first)?;
    Ok(OrchestrationInserted {
        result: InsertResult::Inserted,
        record: r,
    })
}

#[async_trait]
impl OrchestrationStore for SqliteStore {
    async fn orchestration_insert(
        &self,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let out = start_in(&mut tx, new, first, now).await?;
        tx.commit().await?;
        if out.result == InsertResult::Inserted {
            self.notify(&first.lane);
        }
        Ok(out)
    }

    async fn orchestration_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Orchestration>> {
        let mut conn = self.reader.acquire().await?;
        get(&mut conn, tenant, id).await
    }

    async fn orchestration_list(&self, f: &OrchestrationFilter) -> Result<Vec<Orchestration>> {
        let rows = sqlx::query(sql::ORCHESTRATION_LIST)
            .bind(f.tenant_id)
            .bind(f.status.map(|s| s.as_str()))
            .bind(f.kind.as_deref())
            .bind(i64::from(f.limit))
            .fetch_all(&self.reader)
            .await?;
        Ok(crate::orchestration::decodable(&rows, record, |r| {
            r.try_get("id").ok()
        }))
    }

    async fn orchestration_advance(
        &self,
        claim: &ClaimRef,
        t: &Transition,
    ) -> Result<Orchestration> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let done = sqlx::query(sql::ITEM_COMPLETE)
            .bind(to_micros(now))
            .bind(SYSTEM)
            .bind(claim.tenant_id)
            .bind(claim.id)
            .bind(claim.token)
            // A step's item returns nothing: the record is its result.
            .bind(None::<String>)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            let e = refused(&mut tx, claim.tenant_id, claim.id).await?;
            tx.rollback().await?;
            return Err(e);
        }
        // Dropping `tx` on an error rolls the completion back with it.
        let r = apply_and_match(&mut tx, t, now).await?;
        tx.commit().await?;
        self.notify(&r.lane);
        Ok(r)
    }

    async fn orchestration_update(&self, t: &Transition) -> Result<Orchestration> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let r = apply_and_match(&mut tx, t, now).await?;
        tx.commit().await?;
        self.notify(&r.lane);
        Ok(r)
    }

    async fn orchestration_due(&self, limit: u32) -> Result<Vec<Orchestration>> {
        let rows = sqlx::query(sql::ORCHESTRATION_DUE)
            .bind(to_micros(self.now()))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        Ok(crate::orchestration::decodable(&rows, record, |r| {
            r.try_get("id").ok()
        }))
    }

    async fn orchestration_dead_steps(&self, limit: u32) -> Result<Vec<DeadStep>> {
        let rows = sqlx::query(sql::ORCHESTRATION_DEAD_STEPS)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(DeadStep {
                    record: record(row)?,
                    attempts: row.try_get("step_attempts")?,
                    error: row.try_get("step_error")?,
                    cancelled: row.try_get::<i64, _>("step_cancelled")? != 0,
                    failed_at: from_micros(row.try_get("step_failed_at")?)?,
                })
            })
            .collect()
    }

    async fn orchestration_parked_count(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(sql::ORCHESTRATION_PARKED_COUNT)
            .fetch_one(&self.reader)
            .await?)
    }

    async fn orchestration_request_cancel(
        &self,
        tenant: Uuid,
        id: Uuid,
        expected_version: i64,
    ) -> Result<Orchestration> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let row = sqlx::query(sql::ORCHESTRATION_REQUEST_CANCEL)
            .bind(tenant)
            .bind(id)
            .bind(expected_version)
            .bind(to_micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Err(match get(&mut tx, tenant, id).await? {
                Some(r) => Error::Conflict(format!(
                    "orchestration {id}: running at version {expected_version} expected, {} at {} stored",
                    r.status, r.version
                )),
                None => Error::NotFound(format!("orchestration {id}")),
            });
        };
        let r = record(&row)?;
        tx.commit().await?;
        Ok(r)
    }

    async fn orchestration_purge(&self, before: DateTime<Utc>, limit: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        let mut n = 0u64;
        for q in [
            sql::ORCHESTRATION_PURGE_SIGNALS_OF,
            sql::ORCHESTRATION_PURGE,
            sql::ORCHESTRATION_PURGE_CONSUMED,
        ] {
            n += sqlx::query(q)
                .bind(to_micros(before))
                .bind(i64::from(limit))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        if n == 0 {
            // Nothing to delete writes nothing (the writer is shared).
            tx.rollback().await?;
        } else {
            tx.commit().await?;
        }
        Ok(n)
    }

    async fn orchestration_signal(&self, s: &Signal) -> Result<SignalOutcome> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let Some(r) = get(&mut tx, s.tenant_id, s.orchestration_id).await? else {
            return Err(Error::NotFound(format!(
                "orchestration {}",
                s.orchestration_id
            )));
        };
        let inserted = sqlx::query(sql::ORCHESTRATION_SIGNAL_INSERT)
            .bind(s.id)
            .bind(s.tenant_id)
            .bind(s.orchestration_id)
            .bind(&s.name)
            .bind(to_json("payload", &s.payload)?)
            .bind(s.idempotency_key.as_deref())
            .bind(to_micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        if inserted.is_none() {
            tx.commit().await?;
            return Ok(SignalOutcome::Duplicate);
        }
        if r.status.is_final() {
            // A resent key was answered above (a webhook resent after the
            // orchestration finished is the same delivery); a new signal is
            // refused and its row goes with the rollback.
            tx.rollback().await?;
            return Err(Error::Conflict(format!(
                "orchestration {} is {}: it takes no more signals",
                r.id, r.status
            )));
        }
        let mut outcome = SignalOutcome::Kept;
        if r.status == OrchestrationStatus::Parked
            && r.waiting_for.as_deref() == Some(s.name.as_str())
            && let Some(sig) = pending(&mut tx, &r, &s.name).await?
        {
            apply_and_match(&mut tx, &wake_on_signal(&r, &sig, now), now).await?;
            outcome = SignalOutcome::Woke;
        }
        tx.commit().await?;
        if outcome == SignalOutcome::Woke {
            self.notify(&r.lane);
        }
        Ok(outcome)
    }

    async fn orchestration_signal_list(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Signal>> {
        let rows = sqlx::query(sql::ORCHESTRATION_SIGNAL_LIST)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(signal).collect()
    }
}
