//! Fair share on SQLite (migration 0047): the settings, and the fair claim
//! on the single writer's transaction, so reading the passes, sharing the
//! starts ([`Passes::share`]) and writing the passes back are one step
//! with the claim.
//!
//! A claim of a lane with fair share on first claims as before if the
//! lane's pending work is one tenant's (`item_claim_one_tenant.sql`).
//! Otherwise it takes the lane's tenant list (kept per process for
//! [`FAIR_CACHE_TTL`](crate::fairness::FAIR_CACHE_TTL) and voided by its own enqueues, as on PostgreSQL;
//! read by one descent of `items_fair` per tenant), reads the lane's
//! passes, asks [`Passes::quotas`] which tenants this claim may start,
//! reads those tenants' next due items in claim order (a tenant with none
//! is dropped and the quotas drawn again), shares the claim between them
//! and claims the chosen ids. In a lane shared by group (any number of
//! tenants), each tenant's items are read by its groups
//! (`fair_groups.rs`) and its inner passes written back too.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, after, from_micros, to_micros};
use crate::ClaimParams;
use crate::fairness::{
    FAIR_WAITING_CAP, FairLane, FairSettings, FairShare, FairWeight, FairnessStore, LANE_ROW,
    Passes, Rounds, TenantWork,
};
use drover_core::error::{Error, Result};
use drover_core::item::Item;

/// The distinct tenants with pending items in lane ?1: a loose scan of
/// `items_fair`, one descent per tenant.
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
SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL";
/// One tenant's next due items of lane ?1 in claim order, at most ?5.
const FAIR_CANDIDATES: &str = "
SELECT id, priority, available_at FROM items
WHERE lane = ?1 AND status = 'pending' AND tenant_id = ?2 AND available_at <= ?3
  AND (?4 IS NULL OR kind IN (SELECT value FROM json_each(?4)))
ORDER BY priority, available_at
LIMIT ?5";
/// [`FAIR_CANDIDATES`] of the tenant's group ?6, through `items_fair_group`.
static FAIR_CANDIDATES_GROUP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    FAIR_CANDIDATES
        .replace("FROM items\n", "FROM items INDEXED BY items_fair_group\n")
        .replace(
            "AND tenant_id = ?2",
            "AND tenant_id = ?2 AND group_key IS NOT NULL AND group_key = ?6",
        )
});
/// [`FAIR_CANDIDATES`] of the tenant's ungrouped items (through
/// `items_fair`, reading past its grouped items).
static FAIR_CANDIDATES_UNGROUPED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    FAIR_CANDIDATES.replace(
        "AND tenant_id = ?2",
        "AND tenant_id = ?2 AND group_key IS NULL",
    )
});
const FAIR_PASSES: &str = "SELECT tenant_id, pass FROM fair_passes WHERE lane = ?1";
/// The conflict clause of the passes' write: the pass moves, a tenant's
/// starts add up, the lane's row (?2) takes its new version token.
const FAIR_PASS_UPSERT: &str = "
ON CONFLICT (lane, tenant_id) DO UPDATE
SET pass = excluded.pass,
    started = CASE WHEN fair_passes.tenant_id = ?2 THEN excluded.started
                   ELSE fair_passes.started + excluded.started END";
const FAIR_WEIGHT_SET: &str = "
INSERT INTO fair_weights (tenant_id, weight, set_at, set_by) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (tenant_id) DO UPDATE
SET weight = excluded.weight, set_at = excluded.set_at, set_by = excluded.set_by";
const FAIR_LANE_SET: &str = "
INSERT INTO fair_lanes (lane, fair, by_group, set_at, set_by) VALUES (?1, ?2, ?5, ?3, ?4)
ON CONFLICT (lane) DO UPDATE
SET fair = excluded.fair, by_group = excluded.by_group, set_at = excluded.set_at,
    set_by = excluded.set_by";
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
/// it (plus one): room for a tenant that runs short to be made up by the
/// others in the same claim (one with nothing due is dropped and the
/// quotas drawn again).
const PER_START: u32 = 2;
const EXTRA: u32 = 1;

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

/// The tenants with pending items in `lane` as the store keeps them (read
/// within [`FAIR_CACHE_TTL`](crate::fairness::FAIR_CACHE_TTL) and since
/// this process last enqueued), else read now on the writer's transaction
/// (a loose scan of `items_fair`, one descent per tenant) and kept. A list
/// older than the TTL still serves while a task reads it again on the
/// reader pool (a claim that paid for the read was every slow claim of a
/// lane with many tenants). The second value: whether the list came from
/// the cache (a claim that finds nothing due on it reads it again).
pub(super) async fn lane_tenants(
    conn: &mut SqliteConnection,
    store: &SqliteStore,
    lane: &str,
) -> Result<(Arc<Vec<Uuid>>, bool)> {
    let lists = &store.fair_lists;
    let epoch = lists.epoch();
    match lists.get(lane) {
        Some((t, false)) => return Ok((t, true)),
        Some((t, true)) => {
            if lists.start_reading(lane) {
                read_tenants_behind(store, lane, epoch);
            }
            return Ok((t, true));
        }
        None => {}
    }
    let began = std::time::Instant::now();
    let tenants: Vec<Uuid> = sqlx::query_scalar(FAIR_TENANTS)
        .bind(lane)
        .fetch_all(&mut *conn)
        .await?;
    let tenants = Arc::new(tenants);
    lists.put(lane, epoch, tenants.clone(), began.elapsed());
    Ok((tenants, false))
}

/// Reads `lane`'s tenant list again in a task of its own on the reader
/// pool, keeping it at `epoch` (a list read across an enqueue of this
/// process is not kept: the enqueue moved the epoch). A failure leaves the
/// old list until it passes
/// [`STALE_LIST_LIMIT`](crate::fairness::STALE_LIST_LIMIT).
fn read_tenants_behind(store: &SqliteStore, lane: &str, epoch: u64) {
    let reader = store.reader.clone();
    let lists = store.fair_lists.clone();
    let lane = lane.to_owned();
    tokio::spawn(async move {
        let began = std::time::Instant::now();
        let read = sqlx::query_scalar::<_, Uuid>(FAIR_TENANTS)
            .bind(&lane)
            .fetch_all(&reader)
            .await;
        match read {
            Ok(tenants) => lists.put(&lane, epoch, Arc::new(tenants), began.elapsed()),
            Err(e) => {
                tracing::debug!(target: "drover::sqlite", error = %e, "fair share: tenant list not read");
            }
        }
        lists.done_reading(&lane);
    });
}

/// The fair claim of `p` on the open write transaction at `now`, or `None`
/// when fewer than two tenants have pending work in the lane (the caller
/// claims as before).
pub(super) async fn claim_fair_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fair: &FairSettings,
    store: &SqliteStore,
) -> Result<Option<Vec<Item>>> {
    let (tenants, cached) = lane_tenants(conn, store, &p.lane).await?;
    // A lane shared by group shares one tenant's starts too.
    let least = if fair.by_group(&p.lane) { 1 } else { 2 };
    if tenants.len() < least {
        return Ok(None);
    }
    let items = claim_among(conn, store, p, kinds, now, fair, &tenants).await?;
    // A kept list that found nothing due may miss a tenant another process
    // enqueued for: read it now rather than leave that tenant to the poll.
    if cached && items.is_empty() {
        store.fair_lists.forget(&p.lane);
        let (tenants, _) = lane_tenants(conn, store, &p.lane).await?;
        if tenants.len() < least {
            return Ok(None);
        }
        return claim_among(conn, store, p, kinds, now, fair, &tenants)
            .await
            .map(Some);
    }
    Ok(Some(items))
}

/// A fair claim's candidate: its claim order key and id.
type Candidate = ((i64, i64), Uuid);

/// The plain fair claim's reads of a tenant's next due items.
struct Plain<'a> {
    p: &'a ClaimParams,
    kinds: Option<&'a str>,
    now: DateTime<Utc>,
}

impl Plain<'_> {
    /// `tenant`'s next due items in claim order, of group `group` (`''`:
    /// its ungrouped items) or of any (`None`), as many as `quota` starts
    /// call for.
    async fn page(
        &self,
        conn: &mut SqliteConnection,
        tenant: Uuid,
        group: Option<&str>,
        quota: u32,
    ) -> Result<Vec<Candidate>> {
        let cap = quota
            .saturating_mul(PER_START)
            .saturating_add(EXTRA)
            .min(self.p.limit);
        let q = match group {
            None => sqlx::query(FAIR_CANDIDATES),
            Some("") => sqlx::query(FAIR_CANDIDATES_UNGROUPED.as_str()),
            Some(_) => sqlx::query(FAIR_CANDIDATES_GROUP.as_str()),
        };
        let mut q = q
            .bind(&self.p.lane)
            .bind(tenant)
            .bind(to_micros(self.now))
            .bind(self.kinds)
            .bind(i64::from(cap));
        if let Some(g) = group.filter(|g| !g.is_empty()) {
            q = q.bind(g);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: Uuid = r.try_get("id")?;
            let key: (i64, i64) = (r.try_get("priority")?, r.try_get("available_at")?);
            list.push((key, id));
        }
        Ok(list)
    }
}

impl Plain<'_> {
    /// [`Plain::page`] of every tenant of `quotas` (each with its quota)
    /// in one statement: a claim's statements are round trips to the
    /// single writer's thread, and a claim among many tenants reads a
    /// page for each it may start.
    async fn pages(
        &self,
        conn: &mut SqliteConnection,
        quotas: &[(Uuid, u32)],
    ) -> Result<HashMap<Uuid, Vec<Candidate>>> {
        let mut out: HashMap<Uuid, Vec<Candidate>> = HashMap::with_capacity(quotas.len());
        if quotas.is_empty() {
            return Ok(out);
        }
        let sql = many_pages_sql(quotas.len());
        let mut q = sqlx::query(&sql)
            .bind(&self.p.lane)
            .bind(to_micros(self.now))
            .bind(self.kinds);
        for (t, quota) in quotas {
            let cap = quota
                .saturating_mul(PER_START)
                .saturating_add(EXTRA)
                .min(self.p.limit);
            q = q.bind(*t).bind(i64::from(cap));
        }
        for r in q.fetch_all(&mut *conn).await? {
            let t: Uuid = r.try_get("tenant_id")?;
            let id: Uuid = r.try_get("id")?;
            let key: (i64, i64) = (r.try_get("priority")?, r.try_get("available_at")?);
            out.entry(t).or_default().push((key, id));
        }
        // Each member's rows come in its own claim order (a compound's
        // members are not merged), but the statement does not promise it.
        for list in out.values_mut() {
            list.sort_unstable();
        }
        Ok(out)
    }
}

/// The pages of `n` tenants in one statement: `?1` the lane, `?2` now,
/// `?3` the kinds, then each tenant's id and cap (`?4`, `?5`, ...); each
/// member is [`FAIR_CANDIDATES`] of one tenant, so each reads its own
/// descent of `items_fair`.
fn many_pages_sql(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "SELECT * FROM (SELECT tenant_id, id, priority, available_at FROM items
WHERE lane = ?1 AND status = 'pending' AND tenant_id = ?{t} AND available_at <= ?2
  AND (?3 IS NULL OR kind IN (SELECT value FROM json_each(?3)))
ORDER BY priority, available_at
LIMIT ?{c})",
                t = 4 + 2 * i,
                c = 5 + 2 * i
            )
        })
        .collect::<Vec<_>>()
        .join("\nUNION ALL\n")
}

impl super::fair_groups::GroupReader for Plain<'_> {
    type C = Candidate;

    async fn read(
        &mut self,
        conn: &mut SqliteConnection,
        tenant: Uuid,
        key: &str,
        quota: u32,
    ) -> Result<Vec<Candidate>> {
        self.page(conn, tenant, Some(key), quota).await
    }
}

/// The fair claim of `p` among `tenants` (see the module docs).
async fn claim_among(
    conn: &mut SqliteConnection,
    store: &SqliteStore,
    p: &ClaimParams,
    kinds: Option<&str>,
    now: DateTime<Utc>,
    fair: &FairSettings,
    tenants: &[Uuid],
) -> Result<Vec<Item>> {
    let mut passes = read_passes(conn, store, &p.lane).await?;
    let alive: Vec<(Uuid, u32)> = tenants.iter().map(|t| (*t, fair.weight(*t))).collect();
    let by_group = fair.by_group(&p.lane);
    let mut lists: BTreeMap<Uuid, TenantWork<Candidate>> = BTreeMap::new();
    let mut names = HashMap::new();
    // A listed tenant with nothing due (the list holds every tenant with
    // pending work, and may be up to FAIR_CACHE_TTL old) is dropped and
    // the quotas drawn again, so the claim stays work-conserving.
    let mut rounds = Rounds::new(alive);
    let mut reader = Plain { p, kinds, now };
    loop {
        let fresh = rounds.next(&passes, p.limit);
        if fresh.is_empty() {
            break;
        }
        if by_group {
            let (work, n) =
                super::fair_groups::tenants_work(conn, store, &p.lane, &fresh, &mut reader).await?;
            names.extend(n);
            lists.extend(work);
        } else {
            let mut pages = reader.pages(conn, &fresh).await?;
            for (t, _) in &fresh {
                let list = pages.remove(t).unwrap_or_default();
                lists.insert(*t, TenantWork::Items(list));
            }
        }
        let empty: HashSet<Uuid> = fresh
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| lists.get(t).is_none_or(TenantWork::is_empty))
            .collect();
        if !rounds.settle(&empty) {
            break;
        }
    }
    let lists = lists
        .into_iter()
        .map(|(t, l)| (t, fair.weight(t), l))
        .collect();
    let (chosen, inner) = passes.share_work(lists, p.limit as usize, |c| *c, |_| true);
    super::fair_groups::write_group_passes(conn, &p.lane, &inner, &names).await?;
    write_passes(conn, store, &p.lane, &passes).await?;
    if chosen.is_empty() {
        return Ok(Vec::new());
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
    rows.iter().map(row::item).collect()
}

/// The lane's own row: its virtual time and its version token.
const FAIR_LANE_ROW: &str =
    "SELECT pass, started FROM fair_passes WHERE lane = ?1 AND tenant_id = ?2";

/// The lane's passes and its virtual time (the lane's own row), as
/// [`Passes`]: as this process kept them while the lane's row holds the
/// version they were kept at, else every pass of the lane, read and kept.
pub(super) async fn read_passes(
    conn: &mut SqliteConnection,
    store: &SqliteStore,
    lane: &str,
) -> Result<Passes> {
    let own: Option<(i64, i64)> = sqlx::query_as(FAIR_LANE_ROW)
        .bind(lane)
        .bind(LANE_ROW)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some((_, version)) = own
        && let Some(passes) = store.fair_passes.get(lane, version)
    {
        return Ok(passes);
    }
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
    let passes = Passes::new(vt, stored);
    if let Some((_, version)) = own {
        store.fair_passes.put(lane, version, &passes);
    }
    Ok(passes)
}

/// Writes back the passes a share moved, and the lane's virtual time with
/// a fresh version token ([`PassCache`](crate::fairness::PassCache)), and
/// keeps them at that token.
pub(super) async fn write_passes(
    conn: &mut SqliteConnection,
    store: &SqliteStore,
    lane: &str,
    passes: &Passes,
) -> Result<()> {
    if passes.changed().is_empty() {
        return Ok(());
    }
    let version = crate::fairness::pass_version();
    // One statement for the moved passes and the lane's row: a claim's
    // statements are round trips to the single writer's thread.
    let rows: Vec<(Uuid, i64, i64)> = passes
        .changed()
        .iter()
        .map(|(t, (pass, n))| (*t, *pass, i64::try_from(*n).unwrap_or(i64::MAX)))
        .chain(std::iter::once((LANE_ROW, passes.vt(), version)))
        .collect();
    let values: Vec<String> = (0..rows.len())
        .map(|i| format!("(?1, ?{}, ?{}, ?{})", 3 * i + 3, 3 * i + 4, 3 * i + 5))
        .collect();
    let sql = format!(
        "INSERT INTO fair_passes (lane, tenant_id, pass, started) VALUES {} {FAIR_PASS_UPSERT}",
        values.join(", ")
    );
    let mut q = sqlx::query(&sql).bind(lane).bind(LANE_ROW);
    for (t, pass, n) in &rows {
        q = q.bind(*t).bind(*pass).bind(*n);
    }
    q.execute(&mut *conn).await?;
    store.fair_passes.put(lane, version, passes);
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

    async fn fair_lane_set(
        &self,
        lane: &str,
        on: bool,
        by_group: bool,
        actor: Uuid,
    ) -> Result<FairLane> {
        let now = self.now();
        let by_group = on && by_group;
        let mut tx = self.begin().await?;
        sqlx::query(FAIR_LANE_SET)
            .bind(lane)
            .bind(i64::from(on))
            .bind(to_micros(now))
            .bind(actor)
            .bind(i64::from(by_group))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.fair.clear();
        Ok(FairLane {
            lane: lane.to_owned(),
            on,
            by_group,
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
        let l = sqlx::query("SELECT * FROM fair_lanes ORDER BY lane")
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
                // A file before migration 0056 has no such column: its
                // lanes share by tenant.
                by_group: r.try_get::<i64, _>("by_group").is_ok_and(|v| v != 0),
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

    async fn fair_group_passes(&self, lane: &str, tenant: Uuid) -> Result<Vec<(String, i64, u64)>> {
        self.group_passes(lane, tenant).await
    }

    async fn fair_passes_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        // None on a file before migration 0056.
        let has_groups: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master
                            WHERE type = 'table' AND name = 'fair_group_passes')",
        )
        .fetch_one(&mut *tx)
        .await?;
        let groups = if has_groups {
            SqliteStore::group_passes_purge(&mut tx, batch).await?
        } else {
            0
        };
        let batch = batch.saturating_sub(u32::try_from(groups).unwrap_or(u32::MAX));
        let n = sqlx::query(FAIR_PURGE)
            .bind(LANE_ROW)
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            // A claimer's kept passes name the rows just deleted (a purged
            // tenant comes back level with the virtual time): a fresh token
            // makes every claimer read the passes again.
            sqlx::query("UPDATE fair_passes SET started = random() WHERE tenant_id = ?1")
                .bind(LANE_ROW)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n + groups)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::sqlite::SqliteOptions;
    use crate::{ItemStore, Store};
    use drover_core::item::NewItem;

    const LANE: &str = "kept";

    /// A group's and the ungrouped bucket's candidates are the tenant's
    /// statement with the group's index and filter spliced in.
    #[test]
    fn group_candidates_spliced() {
        let g = FAIR_CANDIDATES_GROUP.as_str();
        assert!(g.contains("FROM items INDEXED BY items_fair_group\n"));
        assert!(g.contains("AND group_key IS NOT NULL AND group_key = ?6"));
        let u = FAIR_CANDIDATES_UNGROUPED.as_str();
        assert!(u.contains("AND tenant_id = ?2 AND group_key IS NULL"));
    }

    async fn open(path: &str) -> SqliteStore {
        SqliteStore::open(path, SqliteOptions::default())
            .await
            .unwrap()
    }

    const TENANTS: [u128; 3] = [1, 2, 3];

    /// The lane's virtual time and each tenant's pass (lifted to it) as
    /// they are in the file: every row of the lane.
    async fn in_file(s: &SqliteStore) -> (i64, Vec<i64>) {
        let rows: Vec<(Uuid, i64)> = sqlx::query_as(FAIR_PASSES)
            .bind(LANE)
            .fetch_all(s.writer())
            .await
            .unwrap();
        let p = Passes::new(
            rows.iter().find(|(t, _)| *t == LANE_ROW).map_or(0, |r| r.1),
            rows.iter().filter(|(t, _)| *t != LANE_ROW).copied(),
        );
        let passes = TENANTS.map(|t| p.pass(Uuid::from_u128(t))).to_vec();
        (p.vt(), passes)
    }

    /// The same as `s`'s next claim would take them ([`read_passes`]).
    async fn as_read(s: &SqliteStore) -> (i64, Vec<i64>) {
        let mut tx = s.begin().await.unwrap();
        let p = read_passes(&mut tx, s, LANE).await.unwrap();
        tx.rollback().await.unwrap();
        let passes = TENANTS.map(|t| p.pass(Uuid::from_u128(t))).to_vec();
        (p.vt(), passes)
    }

    /// The rows of the lane's passes.
    async fn rows(s: &SqliteStore) -> usize {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM fair_passes WHERE lane = ?1")
            .bind(LANE)
            .fetch_one(s.writer())
            .await
            .unwrap();
        usize::try_from(n).unwrap()
    }

    async fn claim(s: &SqliteStore) {
        let p = ClaimParams {
            lane: LANE.into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: std::time::Duration::from_secs(60),
            limit: 1,
        };
        assert_eq!(s.claim(&p).await.unwrap().len(), 1);
    }

    /// Two stores on one file stand for two processes: each keeps the
    /// passes it last read or wrote, and must never claim on them once
    /// the other (or the sweep's purge) wrote the lane's passes.
    #[tokio::test]
    async fn kept_passes_are_used_only_while_no_one_else_wrote() {
        let path = std::env::temp_dir().join(format!("drover-passes-{}.db", Uuid::new_v4()));
        let path = path.to_str().unwrap();
        let (a, b) = (open(path).await, open(path).await);
        a.migrate().await.unwrap();
        for _ in 0..5 {
            for t in [1u128, 2] {
                let item = NewItem::new("k", serde_json::json!({}))
                    .with_lane(LANE)
                    .with_tenant(Uuid::from_u128(t));
                a.item_insert(&item).await.unwrap();
            }
        }
        claim(&a).await;
        assert_eq!(as_read(&a).await, in_file(&a).await, "its own write, kept");
        claim(&b).await;
        claim(&b).await;
        assert_eq!(
            as_read(&a).await,
            in_file(&a).await,
            "after another's writes"
        );
        claim(&a).await;
        assert_eq!(as_read(&b).await, in_file(&b).await, "and the other way");
        // Drain the lane until the purge deletes an idle pass.
        let before = rows(&a).await;
        while rows(&a).await >= before {
            claim(&a).await;
            crate::fairness::FairnessStore::fair_passes_purge(&b, 100)
                .await
                .unwrap();
        }
        assert_eq!(as_read(&a).await, in_file(&a).await, "after a purge");
        a.close().await;
        b.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }
}
