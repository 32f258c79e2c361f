//! The claim and the fenced writes that follow it.
//!
//! A claim runs in `BEGIN IMMEDIATE` on the single writer, so its
//! select-then-update is exclusive: two claimers never get the same item.
//! Every write after a claim (complete, fail, defer, release, extend-lease)
//! is one `UPDATE` conditioned on the token, `status = 'claimed'` and the
//! lease against the store's clock (the SQL twin of
//! [`rules::fence_holds`](drover_core::rules::fence_holds)). Zero rows is
//! `Conflict`, or `NotFound` when the tenant has no such item; that read
//! runs only on the error path.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, after, from_micros, to_micros};
use super::sql;
use crate::{ClaimParams, ClaimRef, Completion, FailOutcome, FailParams, Handover};
use drover_core::error::{Error, Result};
use drover_core::item::{Item, Progress, Status, bound_error};

/// The unlimited claim of `p` on the open write transaction at `now`
/// (`kinds` as the JSON array the statement binds; `None`: every kind),
/// behind the flow settings' generation `fgen` when known (nothing is
/// claimed when it moved).
pub(super) async fn claim_unlimited_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fgen: Option<i64>,
) -> Result<Vec<Item>> {
    let statement = match fgen {
        Some(_) => sql::ITEM_CLAIM_CHECKED,
        None => sql::ITEM_CLAIM,
    };
    claim_with(conn, statement, p, kinds, now, fgen).await
}

/// The claim of `p` that `item_claim_one_tenant.sql` takes: nothing
/// unless the lane's pending items are one tenant's and the flow settings'
/// generation is still `fgen`.
async fn claim_one_tenant_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fgen: i64,
) -> Result<Vec<Item>> {
    claim_with(conn, sql::ITEM_CLAIM_ONE_TENANT, p, kinds, now, Some(fgen)).await
}

/// Runs one of the unlimited claim's statements (they bind the same
/// parameters, the generation last when given).
async fn claim_with(
    conn: &mut SqliteConnection,
    statement: &'static str,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fgen: Option<i64>,
) -> Result<Vec<Item>> {
    let mut query = sqlx::query(statement)
        .bind(&p.worker_id)
        .bind(to_micros(after(now, p.lease)))
        .bind(to_micros(now))
        .bind(SYSTEM)
        .bind(&p.lane)
        .bind(kinds)
        .bind(i64::from(p.limit));
    if let Some(g) = fgen {
        query = query.bind(g);
    }
    let rows = query.fetch_all(conn).await?;
    rows.iter().map(row::item).collect()
}

/// The actor that signs every write after the enqueue: the system.
pub(super) const SYSTEM: Uuid = Uuid::nil();

/// Why a fenced write changed nothing: the claim is stale, or the tenant
/// has no such item.
/// The claim of `p` a limit or rate applies to, on the open write
/// transaction at `now`: shared fairly between the lane's tenants where
/// fair share applies (`fair_limited.rs`), else in priority then age order
/// (`limits.rs`; `None` when no limit binds the claim: the caller claims
/// unlimited on the same transaction).
async fn limited_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    limits: &[crate::limits::LimitSetting],
    rates: &[crate::rates::RateSetting],
    now: DateTime<Utc>,
    fair: &crate::fairness::FairSettings,
    store: &SqliteStore,
) -> Result<Option<Vec<Item>>> {
    if let Some(items) =
        super::fair_limited::claim_on(conn, p, limits, rates, now, fair, store).await?
    {
        return Ok(Some(items));
    }
    super::limits::claim_on(conn, p, limits, rates, now).await
}

pub(super) async fn refused(conn: &mut SqliteConnection, tenant: Uuid, id: Uuid) -> Result<Error> {
    let exists: bool = sqlx::query_scalar(sql::ITEM_EXISTS)
        .bind(tenant)
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(if exists {
        Error::Conflict(format!(
            "item {id}: the claim is stale (another token, not claimed, or lease passed)"
        ))
    } else {
        Error::NotFound(format!("item {id}"))
    })
}

impl SqliteStore {
    pub(super) async fn claim(&self, p: &ClaimParams) -> Result<Vec<Item>> {
        if p.limit == 0 {
            return Ok(Vec::new());
        }
        let kinds = kinds_json(p)?;
        let cached = self.limits_cached().await?;
        for _ in 0..crate::rates::STALE_RETRIES {
            if let Some(mut items) = self.claim_once(p, &cached, kinds.as_deref()).await? {
                // RETURNING has no defined order: hand items out in claim
                // order.
                items.sort_by(|a, b| {
                    (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
                });
                if !items.is_empty() {
                    tracing::debug!(target: "drover::sqlite", lane = %p.lane,
                        worker = %p.worker_id, n = items.len(), "claimed");
                }
                return Ok(items);
            }
            // The flow settings' generation moved (another process
            // changed a rate or a closure): read them again.
            self.rates.clear();
        }
        Ok(Vec::new())
    }

    /// One attempt of the claim of `p` under the rates in force as cached
    /// and checked against the flow settings' generation on the writer's
    /// transaction: `None` (nothing claimed) when it moved since they were
    /// read.
    async fn claim_once(
        &self,
        p: &ClaimParams,
        cached: &[crate::limits::LimitSetting],
        kinds: Option<&str>,
    ) -> Result<Option<Vec<Item>>> {
        let in_force = self.rates_cached().await?;
        let rates = &in_force.rates;
        let fair = self.fair_cached().await?;
        // "Now" is read once the write lock is held: read before, it could
        // be stale by the whole wait for the lock (up to the busy timeout),
        // and a lease measured from it would start in the past.
        let mut tx = self.begin().await?;
        let now = self.now();
        if crate::limits::applies(cached, &p.lane, &p.kinds)
            || crate::rates::applies(rates, &p.lane, &p.kinds)
        {
            if in_force.flow_gen.is_some()
                && super::flow_gen::flow_gen_on(&mut *tx).await? != in_force.flow_gen
            {
                return Ok(None);
            }
            // The limits as cached (a change reaches every claimer within
            // the cache's TTL, as on PostgreSQL): exactness is in the count
            // of claimed rows, which the write lock keeps exact. The rates
            // and closures are those of the generation just checked.
            let limited = limited_on(&mut tx, p, cached, rates, now, &fair, self).await?;
            let items = match limited {
                Some(items) => items,
                None => claim_unlimited_on(&mut tx, p, kinds, now, None).await?,
            };
            tx.commit().await?;
            return Ok(Some(items));
        }
        let fair_on = fair.on(&p.lane);
        if fair_on
            && !fair.by_group(&p.lane)
            && let Some(fgen) = in_force.flow_gen
        {
            // A lane whose pending work is one tenant's (the common case:
            // one tenant, or none named) claims in this one statement; the
            // tenant scan of the fair claim would be one more round trip to
            // the writer on every claim.
            let items = claim_one_tenant_on(&mut tx, p, kinds, now, fgen).await?;
            if !items.is_empty() {
                tx.commit().await?;
                return Ok(Some(items));
            }
            if super::flow_gen::flow_gen_on(&mut *tx).await? != in_force.flow_gen {
                return Ok(None);
            }
        }
        if fair_on
            && let Some(items) =
                super::fairness::claim_fair_on(&mut tx, p, kinds, now, &fair, self).await?
        {
            // Dropped uncommitted (rolled back) when the generation moved.
            if in_force.flow_gen.is_some()
                && super::flow_gen::flow_gen_on(&mut *tx).await? != in_force.flow_gen
            {
                return Ok(None);
            }
            tx.commit().await?;
            return Ok(Some(items));
        }
        let items = claim_unlimited_on(&mut tx, p, kinds, now, in_force.flow_gen).await?;
        if items.is_empty()
            && in_force.flow_gen.is_some()
            && super::flow_gen::flow_gen_on(&mut *tx).await? != in_force.flow_gen
        {
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(items))
    }

    pub(super) async fn complete(
        &self,
        c: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        let result = result.map(json_text).transpose()?;
        let mut tx = self.begin().await?;
        let now = to_micros(self.now());
        let Some(linked) = complete_on(&mut tx, c, now, result).await? else {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        };
        tx.commit().await?;
        if linked {
            // Its finish may have released dependants on any lane.
            self.notify(crate::wake::ANY_LANE);
        }
        Ok(())
    }

    pub(super) async fn complete_many(&self, done: &[Completion]) -> Result<Vec<Uuid>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let now = to_micros(self.now());
        let (landed, linked) = complete_many_on(&mut tx, done, now).await?;
        tx.commit().await?;
        if linked {
            self.notify(crate::wake::ANY_LANE);
        }
        Ok(landed)
    }

    /// Completes `done` and then claims by `p` on one write transaction,
    /// when the claim is the limited one with no rate applying: the
    /// claim's count of held slots sees the slots the completions freed
    /// (the single writer keeps it exact), and the worker's freed slot
    /// waits for one commit instead of two. Otherwise, the two calls.
    pub(super) async fn complete_then_claim(
        &self,
        done: &[Completion],
        p: &ClaimParams,
    ) -> Result<Handover> {
        let cached = self.limits_cached().await?;
        let in_force = self.rates_cached().await?;
        if done.is_empty()
            || p.limit == 0
            || !crate::limits::applies(&cached, &p.lane, &p.kinds)
            || crate::rates::applies(&in_force.rates, &p.lane, &p.kinds)
        {
            let landed = self.complete_many(done).await?;
            let claimed = self.claim(p).await;
            return Ok(Handover { landed, claimed });
        }
        let mut tx = self.begin().await?;
        let now = self.now();
        let (landed, linked) = complete_many_on(&mut tx, done, to_micros(now)).await?;
        // A moved generation (a rate or closure changed since the cache
        // was read) leaves the claim to the checked path after the commit.
        let fresh = in_force.flow_gen.is_none()
            || super::flow_gen::flow_gen_on(&mut *tx).await? == in_force.flow_gen;
        let claimed = if fresh {
            let fair = self.fair_cached().await?;
            match limited_on(&mut tx, p, &cached, &in_force.rates, now, &fair, self).await? {
                Some(items) => Some(items),
                None => Some(
                    claim_unlimited_on(&mut tx, p, kinds_json(p)?.as_deref(), now, None).await?,
                ),
            }
        } else {
            None
        };
        tx.commit().await?;
        if linked {
            self.notify(crate::wake::ANY_LANE);
        }
        let claimed = match claimed {
            Some(mut items) => {
                items.sort_by(|a, b| {
                    (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
                });
                Ok(items)
            }
            None => {
                self.rates.clear();
                self.claim(p).await
            }
        };
        Ok(Handover { landed, claimed })
    }

    pub(super) async fn fail(&self, c: &ClaimRef, p: &FailParams) -> Result<FailOutcome> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let message = bound_error(&p.error);
        let Some(r) = fenced(sql::ITEM_FAIL, to_micros(now), c)
            .bind(to_micros(after(now, p.retry_delay)))
            .bind(p.fatal)
            .bind(&message)
            .fetch_optional(&mut *tx)
            .await?
        else {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        };
        let status = row::status(r.try_get("status")?)?;
        let lane: String = r.try_get("lane")?;
        let linked = r.try_get::<i64, _>("linked")? != 0;
        if status == Status::Failed {
            // The dead letter and its audit entry land together or not at all.
            sqlx::query(sql::AUDIT_INSERT)
                .bind(c.tenant_id)
                .bind(c.id)
                .bind("dead_letter")
                .bind(SYSTEM)
                .bind(&message)
                .bind(to_micros(now))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            if linked {
                // Its dead letter may have released dependants (policy run).
                self.notify(crate::wake::ANY_LANE);
            }
            tracing::info!(target: "drover::sqlite", item = %c.id, tenant = %c.tenant_id,
                fatal = p.fatal, "dead-lettered");
            return Ok(FailOutcome::DeadLettered);
        }
        tx.commit().await?;
        if p.retry_delay.is_zero() {
            self.wake_lanes([lane.as_str()]);
        }
        Ok(FailOutcome::Requeued {
            available_at: from_micros(r.try_get("available_at")?)?,
        })
    }

    pub(super) async fn defer(&self, c: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let Some(r) = fenced(sql::ITEM_DEFER, to_micros(now), c)
            .bind(to_micros(after(now, delay)))
            .fetch_optional(&mut *tx)
            .await?
        else {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        };
        tx.commit().await?;
        if delay.is_zero() {
            let lane: String = r.try_get("lane")?;
            self.wake_lanes([lane.as_str()]);
        }
        from_micros(r.try_get("available_at")?)
    }

    pub(super) async fn release(&self, c: &ClaimRef, note: Option<&str>) -> Result<()> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let note = note.map(bound_error);
        let Some(r) = fenced(sql::ITEM_RELEASE, to_micros(now), c)
            .bind(note)
            .fetch_optional(&mut *tx)
            .await?
        else {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        };
        tx.commit().await?;
        let lane: String = r.try_get("lane")?;
        self.wake_lanes([lane.as_str()]);
        Ok(())
    }

    /// Cancels a claimed item at its handler's request: final, no attempt
    /// spent, `note` (bounded) kept as `last_error`, no audit entry (the
    /// audit trail records operators). Fenced like every write after a claim.
    ///
    /// # Errors
    /// [`Error::Conflict`] for a stale claim, [`Error::NotFound`] when the
    /// tenant has no such item, storage errors otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: the transaction commits whole or not at all.
    pub async fn cancel_claimed(&self, c: &ClaimRef, note: &str) -> Result<()> {
        let mut tx = self.begin().await?;
        let now = to_micros(self.now());
        let n = fenced(sql::ITEM_CANCEL_CLAIMED, now, c)
            .bind(bound_error(note))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn progress(&self, c: &ClaimRef, progress: &Progress) -> Result<()> {
        let text = serde_json::to_string(progress)
            .map_err(|e| drover_core::error::Error::invalid("progress", e.to_string()))?;
        let mut tx = self.begin().await?;
        let n = fenced(sql::ITEM_PROGRESS, to_micros(self.now()), c)
            .bind(text)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n != 1 {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn extend_lease(
        &self,
        c: &ClaimRef,
        lease: Duration,
    ) -> Result<DateTime<Utc>> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let Some(r) = fenced(sql::ITEM_EXTEND_LEASE, to_micros(now), c)
            .bind(to_micros(after(now, lease)))
            .fetch_optional(&mut *tx)
            .await?
        else {
            let e = refused(&mut tx, c.tenant_id, c.id).await?;
            return Err(e);
        };
        tx.commit().await?;
        from_micros(r.try_get("lease_expires_at")?)
    }
}

/// A fenced statement with the binds every one starts with: `?1` now, `?2`
/// the system actor, `?3` tenant, `?4` id, `?5` claim token.
fn fenced<'q>(
    sql: &'q str,
    now: i64,
    c: &ClaimRef,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    sqlx::query(sql)
        .bind(now)
        .bind(SYSTEM)
        .bind(c.tenant_id)
        .bind(c.id)
        .bind(c.token)
}

/// JSON as the text SQLite stores.
fn json_text(v: &serde_json::Value) -> Result<String> {
    serde_json::to_string(v)
        .map_err(|e| drover_core::error::Error::invalid("result", e.to_string()))
}

/// One fenced completion with its result: `None` when it did not land,
/// else whether the item was linked (its finish may have released
/// dependants).
async fn complete_on(
    conn: &mut SqliteConnection,
    c: &ClaimRef,
    now: i64,
    result: Option<String>,
) -> Result<Option<bool>> {
    let linked: Option<i64> = fenced(sql::ITEM_COMPLETE, now, c)
        .bind(result)
        .fetch_optional(&mut *conn)
        .await?
        .map(|r| r.try_get(0))
        .transpose()?;
    Ok(linked.map(|l| l != 0))
}

/// `done` completed on the open write transaction at `now` (micros), each
/// row fenced on its own tenant and token: the ids that landed, in
/// `done`'s order, and whether any of them had dependants or a batch
/// (a finish that may release work on any lane).
async fn complete_many_on(
    conn: &mut SqliteConnection,
    done: &[Completion],
    now: i64,
) -> Result<(Vec<Uuid>, bool)> {
    // One statement for the batch: each row is still fenced on its own
    // tenant and token, and a round trip to the writer per row would
    // cost more than the writes. Results take the statement that carries
    // them; a batch without any runs the plain one.
    let with_results = done.iter().any(|c| c.result.is_some());
    let rows: Vec<serde_json::Value> = done
        .iter()
        .map(|c| {
            let mut row = vec![
                serde_json::Value::String(c.claim.id.simple().to_string()),
                serde_json::Value::String(c.claim.tenant_id.simple().to_string()),
                serde_json::Value::String(c.claim.token.simple().to_string()),
            ];
            if with_results {
                row.push(c.result.clone().unwrap_or(serde_json::Value::Null));
            }
            serde_json::Value::Array(row)
        })
        .collect();
    // Bound as JSON text (SQLite has no arrays).
    let json = serde_json::to_string(&rows)
        .map_err(|e| drover_core::error::Error::invalid("claims", e.to_string()))?;
    let statement = if with_results {
        sql::ITEM_COMPLETE_MANY_RESULTS
    } else {
        sql::ITEM_COMPLETE_MANY
    };
    let rows: Vec<(Uuid, i64)> = sqlx::query_as(statement)
        .bind(now)
        .bind(SYSTEM)
        .bind(json)
        .fetch_all(&mut *conn)
        .await?;
    let linked = rows.iter().any(|r| r.1 != 0);
    let ids: std::collections::HashSet<Uuid> = rows.into_iter().map(|r| r.0).collect();
    let landed: Vec<Uuid> = done
        .iter()
        .map(|c| c.claim.id)
        .filter(|id| ids.contains(id))
        .collect();
    if landed.len() < done.len() {
        tracing::debug!(target: "drover::sqlite", stale = done.len() - landed.len(),
            "complete_many: stale claims refused");
    }
    Ok((landed, linked))
}

/// The claim's kinds bound as JSON text (SQLite has no arrays); `None`
/// for every kind. Not a check of the argument (any list of strings
/// encodes).
fn kinds_json(p: &ClaimParams) -> Result<Option<String>> {
    if p.kinds.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(&p.kinds)
        .map(Some)
        .map_err(|e| Error::invalid("kinds", e.to_string()))
}
