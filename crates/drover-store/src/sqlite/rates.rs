//! Rate limits on SQLite: the settings and cells (migration 0043), read
//! and written by the limited claim (`limits::claim_on`) on the single
//! writer's transaction, so admission and the cells it moves are one step
//! with the claim.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::closures::Closure;
use crate::limits::{LimitScope, LimitSource};
use crate::rates::{
    Cells, HeldBack, InForce, Rate, RateSetting, RateStore, RateUsage, applies, effective,
    held_back, usage, wait_for,
};
use drover_core::error::{Error, Result};

const RATE_SET: &str = include_str!("../../sql/sqlite/rate_set.sql");
const RATE_CLEAR: &str = include_str!("../../sql/sqlite/rate_clear.sql");
const RATE_LIST: &str = include_str!("../../sql/sqlite/rate_list.sql");
const RATE_CELLS_ACTIVE: &str = include_str!("../../sql/sqlite/rate_cells_active.sql");
const RATE_CELLS_WRITE: &str = include_str!("../../sql/sqlite/rate_cells_write.sql");
const RATE_CELLS_PURGE: &str = include_str!("../../sql/sqlite/rate_cells_purge.sql");
const RATE_CELLS_OF: &str = include_str!("../../sql/sqlite/rate_cells_of.sql");

fn setting(r: &SqliteRow) -> Result<RateSetting> {
    let scope: String = r.try_get("scope")?;
    let name: String = r.try_get("name")?;
    let source: String = r.try_get("source")?;
    Ok(RateSetting {
        scope: LimitScope::from_parts(&scope, &name)?,
        source: LimitSource::from_name(&source)?,
        rate: Rate {
            count: u32::try_from(r.try_get::<i64, _>("count")?).unwrap_or(1),
            period_ms: u64::try_from(r.try_get::<i64, _>("period_ms")?).unwrap_or(1),
            burst: u32::try_from(r.try_get::<i64, _>("burst")?).unwrap_or(1),
        },
        set_at: from_micros(r.try_get("set_at")?)?,
        set_by: r.try_get("set_by")?,
    })
}

fn cell(r: &SqliteRow) -> Result<(String, DateTime<Utc>)> {
    Ok((r.try_get("key")?, from_micros(r.try_get("tat")?)?))
}

/// The cells ahead of `now` (the only ones that can hold a start back).
pub(super) async fn active_cells<'c, E>(
    conn: E,
    now: DateTime<Utc>,
) -> Result<Vec<(String, DateTime<Utc>)>>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    let rows = sqlx::query(RATE_CELLS_ACTIVE)
        .bind(to_micros(now))
        .fetch_all(conn)
        .await?;
    rows.iter().map(cell).collect()
}

/// The cells ahead of `now` as a claim of `lane` begins on the writer's
/// transaction, as the admission of its candidates starts from them (a
/// cell not among them is idle: it holds nothing back), and the scopes
/// they hold back, which the candidates leave out.
pub(super) async fn cells_now(
    conn: &mut SqliteConnection,
    rates: &[RateSetting],
    lane: &str,
    now: DateTime<Utc>,
) -> Result<(Cells, HeldBack)> {
    let active = active_cells(&mut *conn, now).await?;
    let h = held_back(
        rates,
        lane,
        active.iter().map(|(k, t)| (k.as_str(), *t)),
        now,
    );
    Ok((Cells::new(now, active), h))
}

/// Writes the cells a claim moved, on its transaction.
pub(super) async fn write_cells(
    conn: &mut SqliteConnection,
    changed: &BTreeMap<String, DateTime<Utc>>,
) -> Result<()> {
    if changed.is_empty() {
        return Ok(());
    }
    let rows: Vec<(&str, i64)> = changed
        .iter()
        .map(|(k, t)| (k.as_str(), to_micros(*t)))
        .collect();
    let json = serde_json::to_string(&rows).map_err(|e| Error::invalid("cells", e.to_string()))?;
    sqlx::query(RATE_CELLS_WRITE)
        .bind(json)
        .execute(conn)
        .await?;
    Ok(())
}

/// Every stored rate setting; none on a schema before migration 0043 (a
/// binary ahead of its database until `drover migrate`).
async fn settings_on<'c, E>(conn: E) -> Result<Vec<RateSetting>>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    let rows = match sqlx::query(RATE_LIST).fetch_all(conn).await {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    rows.iter().map(setting).collect()
}

impl SqliteStore {
    /// The rates in force, from the cache while it is fresh, with the
    /// flow settings' generation read before them (a change committed
    /// between the reads leaves the cache a generation behind: the next
    /// claim reads again).
    pub(super) async fn rates_cached(&self) -> Result<InForce> {
        if let Some(v) = self.rates.fresh() {
            return Ok(v);
        }
        let generation = self.rates.generation();
        let flow_gen = super::flow_gen::flow_gen_on(&self.reader).await?;
        let settings = settings_on(&self.reader).await?;
        let closed = super::closures::closures_on(&self.reader, self.now(), None).await?;
        let keys: Vec<String> = closed.iter().map(Closure::key).collect();
        let rates =
            crate::closures::with_closures(effective(&settings), keys.iter().map(String::as_str));
        Ok(self.rates.put(generation, rates, flow_gen))
    }
}

#[async_trait]
impl RateStore for SqliteStore {
    async fn rate_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        rate: Rate,
        actor: Uuid,
    ) -> Result<RateSetting> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(RATE_SET)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .bind(i64::from(rate.count))
            .bind(i64::try_from(rate.period_ms).unwrap_or(i64::MAX))
            .bind(i64::from(rate.burst))
            .bind(to_micros(self.now()))
            .bind(actor)
            .fetch_one(&mut *tx)
            .await?;
        super::flow_gen::flow_gen_bump(&mut tx).await?;
        tx.commit().await?;
        self.rates.clear();
        setting(&r)
    }

    async fn rate_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(RATE_CLEAR)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            super::flow_gen::flow_gen_bump(&mut tx).await?;
        }
        tx.commit().await?;
        self.rates.clear();
        Ok(n > 0)
    }

    async fn rate_settings(&self) -> Result<Vec<RateSetting>> {
        settings_on(&self.reader).await
    }

    async fn rate_usage(&self) -> Result<Vec<RateUsage>> {
        let rates = effective(&self.rate_settings().await?);
        let now = self.now();
        let cells = active_cells(&self.reader, now).await?;
        Ok(usage(
            &rates,
            cells.iter().map(|(k, t)| (k.as_str(), *t)),
            now,
        ))
    }

    async fn rate_cells_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        let behind =
            self.now() - chrono::Duration::from_std(crate::rates::CELL_GRACE).unwrap_or_default();
        let n = match sqlx::query(RATE_CELLS_PURGE)
            .bind(to_micros(behind))
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await
        {
            Ok(r) => r.rows_affected(),
            // A schema before migration 0043: no cells.
            Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => 0,
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        Ok(n)
    }

    async fn rate_cells(
        &self,
        keys: &[String],
    ) -> Result<(DateTime<Utc>, Vec<(String, DateTime<Utc>)>)> {
        let now = self.now();
        let json =
            serde_json::to_string(keys).map_err(|e| Error::invalid("keys", e.to_string()))?;
        let rows = match sqlx::query(RATE_CELLS_OF)
            .bind(json)
            .bind(to_micros(now))
            .fetch_all(&self.reader)
            .await
        {
            Ok(rows) => rows,
            Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        Ok((now, rows.iter().map(cell).collect::<Result<_>>()?))
    }

    async fn rate_wait(&self, lane: &str, kinds: &[String]) -> Result<Option<std::time::Duration>> {
        let rates = self.rates_cached().await?.rates;
        if !applies(&rates, lane, kinds) {
            return Ok(None);
        }
        let now = self.now();
        let cells = active_cells(&self.reader, now).await?;
        Ok(wait_for(
            &rates,
            lane,
            kinds,
            cells.iter().map(|(k, t)| (k.as_str(), *t)),
            now,
        ))
    }
}
