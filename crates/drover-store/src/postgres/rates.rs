//! Rate limits on PostgreSQL: the settings and cells (system role, nil
//! tenant, migration 0043), and the cell steps of the limited claim
//! (`limits.rs`): the cells a claim's candidates start against are locked
//! in key order (`rate_cells_lock.sql`), admitted on the transaction's
//! `now()`, and written back in the transaction that claims the items.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::PgStore;
use crate::limits::{LimitScope, LimitSource};
use crate::rates::{
    Cells, HeldBack, InForce, Rate, RateSetting, RateStore, RateUsage, applies, effective,
    held_back, usage, wait_for,
};
use drover_core::error::Result;

const RATE_SET: &str = include_str!("../../sql/postgres/rate_set.sql");
const RATE_CLEAR: &str = include_str!("../../sql/postgres/rate_clear.sql");
const RATE_LIST: &str = include_str!("../../sql/postgres/rate_list.sql");
const RATE_CELLS_LOCK: &str = include_str!("../../sql/postgres/rate_cells_lock.sql");
const RATE_CELLS_ACTIVE: &str = include_str!("../../sql/postgres/rate_cells_active.sql");
const RATE_CELLS_WRITE: &str = include_str!("../../sql/postgres/rate_cells_write.sql");
const RATE_CELLS_PURGE: &str = include_str!("../../sql/postgres/rate_cells_purge.sql");
const RATE_CELLS_OF: &str = include_str!("../../sql/postgres/rate_cells_of.sql");
fn setting(r: &PgRow) -> Result<RateSetting> {
    let scope: String = r.try_get("scope")?;
    let name: String = r.try_get("name")?;
    let source: String = r.try_get("source")?;
    Ok(RateSetting {
        scope: LimitScope::from_parts(&scope, &name)?,
        source: LimitSource::from_name(&source)?,
        rate: Rate {
            count: u32::try_from(r.try_get::<i32, _>("count")?).unwrap_or(1),
            period_ms: u64::try_from(r.try_get::<i64, _>("period_ms")?).unwrap_or(1),
            burst: u32::try_from(r.try_get::<i32, _>("burst")?).unwrap_or(1),
        },
        set_at: r.try_get("set_at")?,
        set_by: r.try_get("set_by")?,
    })
}

/// Cells as read, with the transaction's clock (the same on every row;
/// `None` when no row came back).
pub(super) struct CellRead {
    pub(super) cells: Vec<(String, DateTime<Utc>)>,
    pub(super) now: Option<DateTime<Utc>>,
    /// Read under the cells' locks by a transaction older than
    /// [`crate::rates::CELL_GRACE`]: it admits no rated start.
    pub(super) stale: bool,
}

impl CellRead {
    /// The claim's admissions over the cells read under their locks:
    /// none at all when the read was stale.
    pub(super) fn into_cells(self) -> Cells {
        let now = self.now.unwrap_or_default();
        if self.stale {
            tracing::debug!(target: "drover::postgres",
                "claim: the transaction is older than the cell grace at its cell locks; no rated start this time");
            return Cells::stale(now);
        }
        Cells::new(now, self.cells)
    }
}

/// [`crate::rates::CELL_GRACE`] in microseconds, as the cell statements
/// take it.
fn grace_us() -> i64 {
    i64::try_from(crate::rates::CELL_GRACE.as_micros()).unwrap_or(i64::MAX)
}

fn cell_read(rows: &[PgRow]) -> Result<CellRead> {
    let mut out = CellRead {
        cells: Vec::with_capacity(rows.len()),
        now: None,
        stale: false,
    };
    for r in rows {
        out.cells.push((r.try_get("key")?, r.try_get("tat")?));
        out.now = Some(r.try_get("now")?);
    }
    Ok(out)
}

impl PgStore {
    /// The rates in force, from the cache while it is fresh, with the
    /// flow settings' generation read before them (so a change committed
    /// between the two reads leaves the cache one generation behind, and
    /// the next claim reads again).
    pub(super) async fn rates_in_force(&self) -> Result<InForce> {
        if let Some(v) = self.rates.fresh() {
            return Ok(v);
        }
        let generation = self.rates.generation();
        let flow_gen = {
            let mut tx = self.begin_system().await?;
            let g = super::flow_gen::flow_gen_on(&mut tx, self.persistent).await?;
            tx.commit().await?;
            g
        };
        let settings = self.rate_settings().await?;
        let closed = crate::closures::ClosureStore::closures(self).await?;
        let keys: Vec<String> = closed.iter().map(crate::closures::Closure::key).collect();
        let rates =
            crate::closures::with_closures(effective(&settings), keys.iter().map(String::as_str));
        Ok(self.rates.put(generation, rates, flow_gen))
    }

    /// The cells ahead of the clock, unlocked (what a claim leaves out of
    /// its candidates).
    pub(super) async fn active_cells(&self, tx: &mut sqlx::PgConnection) -> Result<CellRead> {
        let rows = sqlx::query(RATE_CELLS_ACTIVE)
            .persistent(self.persistent)
            .fetch_all(tx)
            .await?;
        cell_read(&rows)
    }

    /// The scopes the `rates` hold back as a claim of `lane` begins (from
    /// the cells ahead of the clock, unlocked: an optimisation, admission
    /// re-reads the cells it needs under their locks).
    pub(super) async fn held_back_now(
        &self,
        tx: &mut sqlx::PgConnection,
        rates: &[RateSetting],
        lane: &str,
    ) -> Result<HeldBack> {
        if rates.is_empty() {
            return Ok(HeldBack::default());
        }
        let active = self.active_cells(tx).await?;
        Ok(match active.now {
            Some(now) => held_back(
                rates,
                lane,
                active.cells.iter().map(|(k, t)| (k.as_str(), *t)),
                now,
            ),
            None => HeldBack::default(),
        })
    }

    /// Locks (creating idle ones) and reads the cells of `keys`, in key
    /// order, with the transaction's clock.
    pub(super) async fn lock_cells(
        &self,
        tx: &mut sqlx::PgConnection,
        keys: Vec<String>,
    ) -> Result<CellRead> {
        let rows = sqlx::query(RATE_CELLS_LOCK)
            .persistent(self.persistent)
            .bind(keys)
            .bind(grace_us())
            .fetch_all(tx)
            .await?;
        let mut read = cell_read(&rows)?;
        for r in &rows {
            read.stale |= r.try_get::<bool, _>("stale")?;
        }
        Ok(read)
    }

    /// Writes the cells a claim moved, in its transaction.
    pub(super) async fn write_cells(
        &self,
        tx: &mut sqlx::PgConnection,
        changed: &BTreeMap<String, DateTime<Utc>>,
    ) -> Result<()> {
        if changed.is_empty() {
            return Ok(());
        }
        let keys: Vec<&str> = changed.keys().map(String::as_str).collect();
        let tats: Vec<DateTime<Utc>> = changed.values().copied().collect();
        sqlx::query(RATE_CELLS_WRITE)
            .persistent(self.persistent)
            .bind(keys)
            .bind(tats)
            .execute(tx)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl RateStore for PgStore {
    async fn rate_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        rate: Rate,
        actor: Uuid,
    ) -> Result<RateSetting> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(RATE_SET)
            .persistent(self.persistent)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .bind(i32::try_from(rate.count).unwrap_or(i32::MAX))
            .bind(i64::try_from(rate.period_ms).unwrap_or(i64::MAX))
            .bind(i32::try_from(rate.burst).unwrap_or(i32::MAX))
            .bind(actor)
            .fetch_one(&mut *tx)
            .await?;
        super::flow_gen::flow_gen_bump(&mut tx, self.persistent).await?;
        tx.commit().await?;
        self.rates.clear();
        setting(&r)
    }

    async fn rate_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(RATE_CLEAR)
            .persistent(self.persistent)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            super::flow_gen::flow_gen_bump(&mut tx, self.persistent).await?;
        }
        tx.commit().await?;
        self.rates.clear();
        Ok(n > 0)
    }

    async fn rate_settings(&self) -> Result<Vec<RateSetting>> {
        let mut tx = self.begin_system().await?;
        let rows = match sqlx::query(RATE_LIST)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await
        {
            Ok(rows) => rows,
            // undefined_table: a schema before migration 0043 (a binary
            // ahead of its database until `drover migrate`): no rate.
            Err(e) if super::undefined_table(&e) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        rows.iter().map(setting).collect()
    }

    async fn rate_usage(&self) -> Result<Vec<RateUsage>> {
        let rates = effective(&self.rate_settings().await?);
        if rates.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_system().await?;
        let read = self.active_cells(&mut tx).await?;
        tx.commit().await?;
        // No cell ahead of the clock: nothing is held back, whatever now is.
        let now = read.now.unwrap_or_else(Utc::now);
        Ok(usage(
            &rates,
            read.cells.iter().map(|(k, t)| (k.as_str(), *t)),
            now,
        ))
    }

    async fn rate_cells_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let n = match sqlx::query(RATE_CELLS_PURGE)
            .persistent(self.persistent)
            .bind(i64::from(batch))
            .bind(grace_us())
            .execute(&mut *tx)
            .await
        {
            Ok(r) => r.rows_affected(),
            // undefined_table: a schema before migration 0043, no cells.
            Err(e) if super::undefined_table(&e) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        Ok(n)
    }

    async fn rate_cells(
        &self,
        keys: &[String],
    ) -> Result<(DateTime<Utc>, Vec<(String, DateTime<Utc>)>)> {
        let mut tx = self.begin_system().await?;
        let rows = match sqlx::query(RATE_CELLS_OF)
            .persistent(self.persistent)
            .bind(keys)
            .fetch_all(&mut *tx)
            .await
        {
            Ok(rows) => rows,
            // A schema before migration 0043: no cell (nor any rate to
            // compare a clock with).
            Err(e) if super::undefined_table(&e) => return Ok((Utc::now(), Vec::new())),
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        let mut now = None;
        let mut cells = Vec::new();
        for r in &rows {
            now = Some(r.try_get::<DateTime<Utc>, _>("now")?);
            if let Some(key) = r.try_get::<Option<String>, _>("key")? {
                cells.push((key, r.try_get("tat")?));
            }
        }
        Ok((now.unwrap_or_else(Utc::now), cells))
    }

    async fn rate_wait(&self, lane: &str, kinds: &[String]) -> Result<Option<std::time::Duration>> {
        let rates = self.rates_in_force().await?.rates;
        if !applies(&rates, lane, kinds) {
            return Ok(None);
        }
        let mut tx = self.begin_system().await?;
        let read = self.active_cells(&mut tx).await?;
        tx.commit().await?;
        let Some(now) = read.now else {
            return Ok(None);
        };
        Ok(wait_for(
            &rates,
            lane,
            kinds,
            read.cells.iter().map(|(k, t)| (k.as_str(), *t)),
            now,
        ))
    }
}
