//! Orchestration records and signals on PostgreSQL.
//!
//! Per-tenant calls run as the runtime role with the tenant set for the
//! transaction (RLS scopes every statement); the sweep's due list, the
//! parked gauge and the unscoped listing are system operations.
//!
//! A signal and a park of one record serialize on the record's row lock:
//! the signal takes it first (`FOR UPDATE`), the park's compare-and-set
//! takes it with its `UPDATE`, and each then reads the other's committed
//! work (READ COMMITTED gives each statement a fresh snapshot), so a signal
//! that arrives while a park commits is either consumed by the park or
//! wakes the parked record.
//!
//! An operator's cancel request takes the row lock too (its `UPDATE`), so a
//! step's transition either reads the flag under the lock (its `UPDATE`
//! keeps it, `cancel_requested OR $13`) and turns into compensation in the
//! same transaction, or commits first and the request meets the new
//! version (the operator's call re-reads and retries).
//!
//! A transition's step item that is not inserted (its id or key held by
//! another item) fails the transaction: no record is left without its item.

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::items::{insert_one, miss};
use super::{PgStore, sql};
use crate::ClaimRef;
use crate::orchestration::transition::{
    cancel_due, cancel_requested, parks_for_signal, wake_on_signal,
};
use crate::orchestration::{
    DeadStep, HistoryEntry, NewOrchestration, Orchestration, OrchestrationFilter,
    OrchestrationInserted, OrchestrationStatus, OrchestrationStore, Signal, SignalOutcome,
    Transition,
};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, NewItem};

fn bad(e: impl std::fmt::Display) -> Error {
    Error::Storage(Opaque::msg(e.to_string()))
}

fn record(row: &PgRow) -> Result<Orchestration> {
    let status: String = row.try_get("status")?;
    let resume_as: Option<String> = row.try_get("resume_as")?;
    let completed: Json<Vec<String>> = row.try_get("completed")?;
    let history: Json<Vec<HistoryEntry>> = row.try_get("history")?;
    Ok(Orchestration {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: row.try_get("kind")?,
        lane: row.try_get("lane")?,
        max_attempts: row.try_get("max_attempts")?,
        status: OrchestrationStatus::parse(&status).map_err(bad)?,
        step: row.try_get("step")?,
        state: row.try_get("state")?,
        version: row.try_get("version")?,
        parked_until: row.try_get("parked_until")?,
        waiting_for: row.try_get("waiting_for")?,
        timeout_step: row.try_get("timeout_step")?,
        completed: completed.0,
        history: history.0,
        history_dropped: row.try_get("history_dropped")?,
        result: row.try_get("result")?,
        error: row.try_get("error")?,
        cancel_requested: row.try_get("cancel_requested")?,
        resume_as: resume_as
            .map(|s| OrchestrationStatus::parse(&s))
            .transpose()
            .map_err(bad)?,
        idempotency_key: row.try_get("idempotency_key")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn signal(row: &PgRow) -> Result<Signal> {
    Ok(Signal {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        orchestration_id: row.try_get("orchestration_id")?,
        name: row.try_get("name")?,
        payload: row.try_get("payload")?,
        idempotency_key: row.try_get("idempotency_key")?,
        consumed_at: row.try_get("consumed_at")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The compare-and-set with what rides along; `Conflict` on a stale version.
async fn apply(conn: &mut PgConnection, p: bool, t: &Transition) -> Result<Orchestration> {
    let w = &t.write;
    let row = sqlx::query(sql::ORCHESTRATION_UPDATE)
        .persistent(p)
        .bind(t.id)
        .bind(t.expected_version)
        .bind(w.status.as_str())
        .bind(&w.step)
        .bind(&w.state)
        .bind(w.parked_until)
        .bind(w.waiting_for.as_deref())
        .bind(w.timeout_step.as_deref())
        .bind(Json(&w.completed))
        .bind(Json(&w.history))
        .bind(w.result.as_ref())
        .bind(w.error.as_deref())
        .bind(w.cancel_requested)
        .bind(w.resume_as.map(|s| s.as_str()))
        .bind(w.history_dropped)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        let now = sqlx::query(sql::ORCHESTRATION_GET)
            .persistent(p)
            .bind(t.id)
            .fetch_optional(&mut *conn)
            .await?;
        return Err(match now {
            Some(r) => Error::Conflict(format!(
                "orchestration {}: version {} expected, {} stored",
                t.id,
                t.expected_version,
                r.try_get::<i64, _>("version")?
            )),
            None => Error::NotFound(format!("orchestration {}", t.id)),
        });
    };
    let r = record(&row)?;
    if let Some(sid) = t.consume_signal {
        sqlx::query(sql::ORCHESTRATION_SIGNAL_CONSUME)
            .persistent(p)
            .bind(sid)
            .execute(&mut *conn)
            .await?;
    }
    // A cancel request found under the lock: the follow-up transition
    // inserts the compensation's item instead of this one.
    if let Some(item) = t.enqueue.as_ref().filter(|_| !cancel_due(&r)) {
        inserted(insert_one(conn, item, p).await?.result, item)?;
    }
    Ok(r)
}

/// `Conflict` unless the step item was inserted: a key or id held by
/// another item must fail the transition, not leave the record without its
/// item. The caller's transaction is then dropped, rolling back everything.
pub(super) fn inserted(result: InsertResult, item: &NewItem) -> Result<()> {
    if result == InsertResult::Inserted {
        return Ok(());
    }
    Err(Error::Conflict(format!(
        "the step item {} could not be inserted ({result:?}, key {:?})",
        item.id, item.idempotency_key
    )))
}

async fn pending(
    conn: &mut PgConnection,
    p: bool,
    r: &Orchestration,
    name: &str,
) -> Result<Option<Signal>> {
    let row = sqlx::query(sql::ORCHESTRATION_SIGNAL_PENDING)
        .persistent(p)
        .bind(r.id)
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(signal).transpose()
}

/// `apply`, then a park for a signal already waiting becomes its wake-up.
async fn apply_and_match(
    conn: &mut PgConnection,
    p: bool,
    t: &Transition,
) -> Result<Orchestration> {
    let r = apply(conn, p, t).await?;
    if cancel_due(&r) {
        return apply(conn, p, &cancel_requested(&r, chrono::Utc::now())).await;
    }
    if let Some(name) = parks_for_signal(t)
        && let Some(sig) = pending(conn, p, &r, name).await?
    {
        return apply(conn, p, &wake_on_signal(&r, &sig, chrono::Utc::now())).await;
    }
    Ok(r)
}

/// Inserts a record and its first item on a connection already under the
/// record's tenant and the runtime role; resolves a collision to the
/// existing record and then inserts nothing.
async fn insert_on(
    conn: &mut PgConnection,
    p: bool,
    new: &NewOrchestration,
    first: &NewItem,
) -> Result<OrchestrationInserted> {
    let row = sqlx::query(sql::ORCHESTRATION_INSERT)
        .persistent(p)
        .bind(new.id)
        .bind(new.tenant_id)
        .bind(&new.kind)
        .bind(&new.lane)
        .bind(new.max_attempts)
        .bind(&new.step)
        .bind(&new.state)
        .bind(new.idempotency_key.as_deref())
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = row {
        let r = record(&row)?;
        inserted(insert_one(conn, first, p).await?.result, first)?;
        return Ok(OrchestrationInserted {
            result: InsertResult::Inserted,
            record: r,
        });
    }
    let existing = sqlx::query(sql::ORCHESTRATION_FIND_COLLISION)
        .persistent(p)
        .bind(new.id)
        .bind(new.idempotency_key.as_deref())
        .fetch_optional(&mut *conn)
        .await?;
    match existing {
        Some(row) => {
            let r = record(&row)?;
            let result = if r.id == new.id {
                InsertResult::IdExists
            } else {
                InsertResult::KeyExists
            };
            Ok(OrchestrationInserted { result, record: r })
        }
        // Another tenant's record holds the id: refuse without showing it.
        None => Err(Error::Conflict(format!(
            "orchestration id {} is taken",
            new.id
        ))),
    }
}

/// Starts an orchestration inside the caller's transaction on `conn`, in
/// the drover tables of `schema`: the record and its first item exist if
/// and only if the caller commits. Role, `search_path` and tenant are
/// switched for its own statements only (inside a savepoint) and put back,
/// as [`insert_in`](super::insert_in) does.
///
/// # Errors
/// As [`OrchestrationStore::orchestration_insert`]; on an error the
/// savepoint is rolled back and the caller's transaction stays usable.
///
/// # Cancel safety
/// Not cancel safe in the caller's transaction (see
/// [`insert_in`](super::insert_in)).
pub async fn start_in(
    conn: &mut PgConnection,
    schema: &str,
    new: &NewOrchestration,
    first: &NewItem,
) -> Result<OrchestrationInserted> {
    use sqlx::Connection;
    // The orchestration and its item are the caller's to validate (the
    // queue does); the schema is a PostgreSQL-only argument, spliced into
    // SQL text, so it is checked here.
    super::validate_schema(schema)?;
    let mut sp = conn.begin().await?;
    let saved = super::items::enter_caller_tx(&mut sp, schema, new.tenant_id).await?;
    // Unnamed statements: the caller's connection may be pooled.
    let out = insert_on(&mut sp, false, new, first).await?;
    super::items::leave_caller_tx(&mut sp, saved).await?;
    sp.commit().await?;
    Ok(out)
}

#[async_trait]
impl OrchestrationStore for PgStore {
    async fn orchestration_insert(
        &self,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted> {
        let mut tx = self.begin_tenant(new.tenant_id).await?;
        let out = insert_on(&mut tx, self.persistent, new, first).await?;
        tx.commit().await?;
        if out.result == InsertResult::Inserted {
            self.wake_local(&first.lane);
        }
        Ok(out)
    }

    async fn orchestration_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Orchestration>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(sql::ORCHESTRATION_GET)
            .persistent(self.persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(record).transpose()
    }

    async fn orchestration_list(&self, f: &OrchestrationFilter) -> Result<Vec<Orchestration>> {
        let mut tx = match f.tenant_id {
            Some(t) => self.begin_tenant(t).await?,
            None => self.begin_system().await?,
        };
        let rows = sqlx::query(sql::ORCHESTRATION_LIST)
            .persistent(self.persistent)
            .bind(f.tenant_id)
            .bind(f.status.map(|s| s.as_str()))
            .bind(f.kind.as_deref())
            .bind(i64::from(f.limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(crate::orchestration::decodable(&rows, record, |r| {
            r.try_get("id").ok()
        }))
    }

    async fn orchestration_advance(
        &self,
        claim: &ClaimRef,
        t: &Transition,
    ) -> Result<Orchestration> {
        let mut tx = self.begin_tenant(claim.tenant_id).await?;
        let n = sqlx::query(sql::ITEM_COMPLETE)
            .persistent(self.persistent)
            .bind(claim.id)
            .bind(claim.token)
            // A step's item returns nothing: the record is its result.
            .bind(None::<serde_json::Value>)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(miss(&mut tx, claim.id, "completion").await);
        }
        // Dropping `tx` on an error rolls the completion back with it.
        let r = apply_and_match(&mut tx, self.persistent, t).await?;
        tx.commit().await?;
        self.wake_local(&r.lane);
        Ok(r)
    }

    async fn orchestration_update(&self, t: &Transition) -> Result<Orchestration> {
        let mut tx = self.begin_tenant(t.tenant_id).await?;
        let r = apply_and_match(&mut tx, self.persistent, t).await?;
        tx.commit().await?;
        self.wake_local(&r.lane);
        Ok(r)
    }

    async fn orchestration_due(&self, limit: u32) -> Result<Vec<Orchestration>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(sql::ORCHESTRATION_DUE)
            .persistent(self.persistent)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(crate::orchestration::decodable(&rows, record, |r| {
            r.try_get("id").ok()
        }))
    }

    async fn orchestration_dead_steps(&self, limit: u32) -> Result<Vec<DeadStep>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(sql::ORCHESTRATION_DEAD_STEPS)
            .persistent(self.persistent)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| {
                Ok(DeadStep {
                    record: record(row)?,
                    attempts: row.try_get("step_attempts")?,
                    error: row.try_get("step_error")?,
                    cancelled: row.try_get("step_cancelled")?,
                    failed_at: row.try_get("step_failed_at")?,
                })
            })
            .collect()
    }

    async fn orchestration_parked_count(&self) -> Result<i64> {
        let mut tx = self.begin_system().await?;
        let n: i64 = sqlx::query_scalar(sql::ORCHESTRATION_PARKED_COUNT)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn orchestration_request_cancel(
        &self,
        tenant: Uuid,
        id: Uuid,
        expected_version: i64,
    ) -> Result<Orchestration> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(sql::ORCHESTRATION_REQUEST_CANCEL)
            .persistent(self.persistent)
            .bind(id)
            .bind(expected_version)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            let now = sqlx::query(sql::ORCHESTRATION_GET)
                .persistent(self.persistent)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            return Err(match now.as_ref().map(record).transpose()? {
                Some(r) => Error::Conflict(format!(
                    "orchestration {id}: running at version {expected_version} expected, {} at {} stored",
                    r.status, r.version
                )),
                None => Error::NotFound(format!("orchestration {id}")),
            });
        };
        tx.commit().await?;
        record(&row)
    }

    async fn orchestration_purge(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let mut n = 0u64;
        for q in [
            sql::ORCHESTRATION_PURGE_SIGNALS_OF,
            sql::ORCHESTRATION_PURGE,
            sql::ORCHESTRATION_PURGE_CONSUMED,
        ] {
            n += sqlx::query(q)
                .persistent(self.persistent)
                .bind(before)
                .bind(i64::from(limit))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(n)
    }

    async fn orchestration_signal(&self, s: &Signal) -> Result<SignalOutcome> {
        let mut tx = self.begin_tenant(s.tenant_id).await?;
        let Some(row) = sqlx::query(sql::ORCHESTRATION_LOCK)
            .persistent(self.persistent)
            .bind(s.orchestration_id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(Error::NotFound(format!(
                "orchestration {}",
                s.orchestration_id
            )));
        };
        let r = record(&row)?;
        let inserted = sqlx::query(sql::ORCHESTRATION_SIGNAL_INSERT)
            .persistent(self.persistent)
            .bind(s.id)
            .bind(s.tenant_id)
            .bind(s.orchestration_id)
            .bind(&s.name)
            .bind(&s.payload)
            .bind(s.idempotency_key.as_deref())
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
            && let Some(sig) = pending(&mut tx, self.persistent, &r, &s.name).await?
        {
            apply_and_match(
                &mut tx,
                self.persistent,
                &wake_on_signal(&r, &sig, chrono::Utc::now()),
            )
            .await?;
            outcome = SignalOutcome::Woke;
        }
        tx.commit().await?;
        if outcome == SignalOutcome::Woke {
            self.wake_local(&r.lane);
        }
        Ok(outcome)
    }

    async fn orchestration_signal_list(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Signal>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(sql::ORCHESTRATION_SIGNAL_LIST)
            .persistent(self.persistent)
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(signal).collect()
    }
}
