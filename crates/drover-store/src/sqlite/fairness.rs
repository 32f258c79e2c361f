//! Fair share on SQLite (migration 0047): the settings, and the fair claim
//! on the single writer's transaction, so reading the passes, sharing the
//! starts ([`Passes::share`]) and writing the passes back are one step
//! with the claim.
//!
//! A claim of a lane with fair share on first finds the tenants with due
//! work (one descent of `items_fair` per tenant); with fewer than two it
//! claims as before (no pass is read or written). Otherwise it reads the
//! lane's passes, asks [`Passes::quotas`] which tenants this claim may
//! start, reads those tenants' next items in claim order, shares the
//! claim between them and claims the chosen ids.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, after, from_micros, to_micros};
use crate::ClaimParams;
use crate::fairness::{
    FAIR_WAITING_CAP, FairLane, FairSettings, FairShare, FairWeight, FairnessStore, LANE_ROW,
    Passes,
};
use drover_core::error::{Error, Result};
use drover_core::item::Item;

/// The distinct tenants with pending items in lane ?1 (a loose scan of
/// `items_fair`), kept when one of them is due at ?2 and of the kinds ?3
/// (JSON array; NULL: every kind).
pub(super) const FAIR_TENANTS: &str = "
WITH RECURSIVE t(tenant_id) AS (
    SELECT (SELECT tenant_id FROM items WHERE lane = ?1 AND status = 'pending'
            ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT i.tenant_id FROM items i
            WHERE i.lane = ?1 AND i.status = 'pending' AND i.tenant_id > t.tenant_id
            ORDER BY i.tenant_id LIMIT 1)
    FROM t WHERE t.tenant_id IS NOT NULL
)
SELECT tenant_id FROM t
WHERE tenant_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM items i
              WHERE i.lane = ?1 AND i.status = 'pending' AND i.tenant_id = t.tenant_id
                AND i.available_at <= ?2
                AND (?3 IS NULL OR i.kind IN (SELECT value FROM json_each(?3))))";
/// One tenant's next due items of lane ?1 in claim order, at most ?5.
const FAIR_CANDIDATES: &str = "
SELECT id, priority, available_at FROM items
WHERE lane = ?1 AND status = 'pending' AND tenant_id = ?2 AND available_at <= ?3
  AND (?4 IS NULL OR kind IN (SELECT value FROM json_each(?4)))
ORDER BY priority, available_at
LIMIT ?5";
const FAIR_PASSES: &str = "SELECT tenant_id, pass FROM fair_passes WHERE lane = ?1";
const FAIR_PASS_WRITE: &str = "
INSERT INTO fair_passes (lane, tenant_id, pass, started) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (lane, tenant_id) DO UPDATE
SET pass = excluded.pass, started = fair_passes.started + excluded.started";
const FAIR_WEIGHT_SET: &str = "
INSERT INTO fair_weights (tenant_id, weight, set_at, set_by) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (tenant_id) DO UPDATE
SET weight = excluded.weight, set_at = excluded.set_at, set_by = excluded.set_by";
const FAIR_LANE_SET: &str = "
INSERT INTO fair_lanes (lane, fair, set_at, set_by) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (lane) DO UPDATE
SET fair = excluded.fair, set_at = excluded.set_at, set_by = excluded.set_by";
/// Each tenant's due items per lane, counted up to a cap (see the file).
const FAIR_WAITING: &str = include_str!("../../sql/sqlite/fair_waiting.sql");
/// Idle passes: at or behind their lane's virtual time (the lane's own
/// row, [`LANE_ROW`]), or of a tenant with nothing pending in the lane (it comes back
/// lifted to the virtual time: at most one start ahead of where its row
/// would have put it), at most ?2.
const FAIR_PURGE: &str = "
DELETE FROM fair_passes WHERE rowid IN (
    SELECT p.rowid FROM fair_passes p
    JOIN fair_passes v ON v.lane = p.lane AND v.tenant_id = ?1
    WHERE p.tenant_id <> ?1
      AND (p.pass <= v.pass
           OR NOT EXISTS (SELECT 1 FROM items i WHERE i.lane = p.lane
                          AND i.tenant_id = p.tenant_id AND i.status = 'pending'))
    LIMIT ?2)";

/// How many candidates a tenant's list holds per start its quota gives
/// it (plus a few): room for a tenant that runs short to be made up by
/// the others in the same claim.
const PER_START: u32 = 2;
const EXTRA: u32 = 8;

impl SqliteStore {
    /// The fair-share settings, from the cache while it is fresh.
    pub(super) async fn fair_cached(&self) -> Result<std::sync::Arc<FairSettings>> {
        if let Some(v) = self.fair.fresh() {
            return Ok(v);
        }
        let s = self.fair_settings().await?;
        Ok(self.fair.put(s))
    }
}

/// The fair claim of `p` on the open write transaction at `now`, or `None`
/// when fewer than two tenants have due work in the lane (the caller claims
/// as before).
pub(super) async fn claim_fair_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fair: &FairSettings,
) -> Result<Option<Vec<Item>>> {
    let tenants: Vec<Uuid> = sqlx::query_scalar(FAIR_TENANTS)
        .bind(&p.lane)
        .bind(to_micros(now))
        .bind(kinds)
        .fetch_all(&mut *conn)
        .await?;
    if tenants.len() < 2 {
        return Ok(None);
    }
    let mut passes = read_passes(conn, &p.lane).await?;
    let weighted: Vec<(Uuid, u32)> = tenants.iter().map(|t| (*t, fair.weight(*t))).collect();
    let mut lists = Vec::new();
    for (t, q) in passes.quotas(&weighted, p.limit) {
        let cap = q
            .saturating_mul(PER_START)
            .saturating_add(EXTRA)
            .min(p.limit);
        let rows = sqlx::query(FAIR_CANDIDATES)
            .bind(&p.lane)
            .bind(t)
            .bind(to_micros(now))
            .bind(kinds)
            .bind(i64::from(cap))
            .fetch_all(&mut *conn)
            .await?;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: Uuid = r.try_get("id")?;
            let key: (i64, i64) = (r.try_get("priority")?, r.try_get("available_at")?);
            list.push((key, id));
        }
        lists.push((t, fair.weight(t), list));
    }
    let chosen = passes.share(lists, p.limit as usize, |c| *c, |_| true);
    write_passes(conn, &p.lane, &passes).await?;
    if chosen.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let ids: Vec<String> = chosen
        .iter()
        .map(|(_, id)| id.simple().to_string())
        .collect();
    let ids = serde_json::to_string(&ids).map_err(|e| Error::invalid("ids", e.to_string()))?;
    let rows = sqlx::query(super::limits::LIMIT_CLAIM)
        .bind(&p.worker_id)
        .bind(to_micros(after(now, p.lease)))
        .bind(to_micros(now))
        // The system signs the claim, as every write after the enqueue.
        .bind(Uuid::nil())
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?;
    let items = rows.iter().map(row::item).collect::<Result<Vec<_>>>()?;
    Ok(Some(items))
}

/// The lane's passes and its virtual time (the lane's own row), as
/// [`Passes`].
pub(super) async fn read_passes(conn: &mut SqliteConnection, lane: &str) -> Result<Passes> {
    let rows = sqlx::query(FAIR_PASSES)
        .bind(lane)
        .fetch_all(&mut *conn)
        .await?;
    let mut vt = 0i64;
    let mut stored = Vec::with_capacity(rows.len());
    for r in &rows {
        let t: Uuid = r.try_get("tenant_id")?;
        let pass: i64 = r.try_get("pass")?;
        if t == LANE_ROW {
            vt = pass;
        } else {
            stored.push((t, pass));
        }
    }
    Ok(Passes::new(vt, stored))
}

/// Writes back the passes a share moved, and the lane's virtual time.
pub(super) async fn write_passes(
    conn: &mut SqliteConnection,
    lane: &str,
    passes: &Passes,
) -> Result<()> {
    if passes.changed().is_empty() {
        return Ok(());
    }
    for (t, (pass, n)) in passes.changed() {
        sqlx::query(FAIR_PASS_WRITE)
            .bind(lane)
            .bind(*t)
            .bind(*pass)
            .bind(i64::try_from(*n).unwrap_or(i64::MAX))
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(FAIR_PASS_WRITE)
        .bind(lane)
        .bind(LANE_ROW)
        .bind(passes.vt())
        .bind(0i64)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl FairnessStore for SqliteStore {
    async fn fair_weight_set(&self, tenant: Uuid, weight: u32, actor: Uuid) -> Result<FairWeight> {
        let now = self.now();
        let mut tx = self.begin().await?;
        sqlx::query(FAIR_WEIGHT_SET)
            .bind(tenant)
            .bind(i64::from(weight))
            .bind(to_micros(now))
            .bind(actor)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.fair.clear();
        Ok(FairWeight {
            tenant,
            weight,
            set_at: from_micros(to_micros(now))?,
            set_by: actor,
        })
    }

    async fn fair_weight_clear(&self, tenant: Uuid) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("DELETE FROM fair_weights WHERE tenant_id = ?1")
            .bind(tenant)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        self.fair.clear();
        Ok(n > 0)
    }

    async fn fair_lane_set(&self, lane: &str, on: bool, actor: Uuid) -> Result<FairLane> {
        let now = self.now();
        let mut tx = self.begin().await?;
        sqlx::query(FAIR_LANE_SET)
            .bind(lane)
            .bind(i64::from(on))
            .bind(to_micros(now))
            .bind(actor)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.fair.clear();
        Ok(FairLane {
            lane: lane.to_owned(),
            on,
            set_at: from_micros(to_micros(now))?,
            set_by: actor,
        })
    }

    async fn fair_settings(&self) -> Result<FairSettings> {
        let w = sqlx::query(
            "SELECT tenant_id, weight, set_at, set_by FROM fair_weights ORDER BY tenant_id",
        )
        .fetch_all(&self.reader)
        .await?;
        let l = sqlx::query("SELECT lane, fair, set_at, set_by FROM fair_lanes ORDER BY lane")
            .fetch_all(&self.reader)
            .await?;
        let mut out = FairSettings::default();
        for r in &w {
            out.weights.push(FairWeight {
                tenant: r.try_get("tenant_id")?,
                weight: u32::try_from(r.try_get::<i64, _>("weight")?).unwrap_or(1),
                set_at: from_micros(r.try_get("set_at")?)?,
                set_by: r.try_get("set_by")?,
            });
        }
        for r in &l {
            out.lanes.push(FairLane {
                lane: r.try_get("lane")?,
                on: r.try_get::<i64, _>("fair")? != 0,
                set_at: from_micros(r.try_get("set_at")?)?,
                set_by: r.try_get("set_by")?,
            });
        }
        Ok(out)
    }

    async fn fair_shares(&self) -> Result<Vec<FairShare>> {
        let settings = self.fair_settings().await?;
        let waiting = sqlx::query(FAIR_WAITING)
            .bind(to_micros(self.now()))
            .bind(i64::try_from(FAIR_WAITING_CAP).unwrap_or(i64::MAX))
            .fetch_all(&self.reader)
            .await?;
        let passes = sqlx::query("SELECT lane, tenant_id, pass, started FROM fair_passes")
            .fetch_all(&self.reader)
            .await?;
        let passes = passes
            .iter()
            .map(|r| {
                let started = u64::try_from(r.try_get::<i64, _>("started")?).unwrap_or(0);
                Ok((
                    r.try_get("lane")?,
                    r.try_get("tenant_id")?,
                    r.try_get("pass")?,
                    started,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let waiting = waiting
            .iter()
            .map(|r| {
                let n = u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0);
                Ok((r.try_get("lane")?, r.try_get("tenant_id")?, n))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(crate::fairness::shares(&settings, passes, waiting))
    }

    async fn fair_passes_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(FAIR_PURGE)
            .bind(LANE_ROW)
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
