//! Fair share on PostgreSQL (migration 0047): the settings (system role),
//! and the fair claim.
//!
//! A claim of a lane with fair share on, that no limit or rate applies to,
//! first asks whether the lane's pending work is of more than one tenant
//! (two descents of `items_fair`; the answer is kept for
//! [`FAIR_CACHE_TTL`], and forgotten whenever this process enqueues or
//! wakes the lane): with one, it is `claim_items` as before, and no pass is
//! read or written. Otherwise the claim is one system-role transaction:
//!
//! 1. the flow settings' generation (as every claim checks it);
//! 2. the lane's own pass row, upserted and so locked: every fair claim of
//!    the lane is serialised on it, and reads the passes its predecessor
//!    wrote;
//! 3. the tenants with due work (one descent per tenant), their passes,
//!    and [`Passes::quotas`]: which tenants this claim may start;
//! 4. those tenants' next due items in claim order, shared by
//!    [`Passes::share`], claimed in one `UPDATE` (re-checked `pending`, so
//!    an item another path claimed meanwhile is skipped), and the moved
//!    passes written back, all before the commit.
//!
//! In a lane shared by group the claim takes this path for any number of
//! tenants, and step 4 reads each tenant's items by its groups
//! (`fair_groups.rs`), whose moved passes are written before the commit.
//!
//! In a lane shared by tenant, when this process kept the lane's passes,
//! the whole claim is first tried as one call (`fair_call.rs`, migration
//! 0057), which runs only while the lane's row still holds the kept
//! passes' version token. Otherwise (or where that call's round could not
//! fill the claim) steps 1 to 3 and the first round of step 4's reads are
//! one statement (`fair_first.rs`), whose read is kept only under the same
//! check; the rounds' reads live in `fair_rounds.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::claim_gen::Attempt;
use super::fair_rounds::{
    Candidate, EXTRA, FAIR_CANDIDATES, FAIR_LOCK_CTE, FLOW_GEN_COLUMN, PER_START, Works,
    candidate_lists, read_round, round_caps, settle_round,
};
use super::limits::LIMIT_CLAIM;
use super::{PgStore, row, secs};
use crate::ClaimParams;
use crate::fairness::{
    FAIR_WAITING_CAP, FairLane, FairSettings, FairShare, FairWeight, FairnessStore, LANE_ROW,
    Passes, Rounds,
};
use crate::rates::InForce;

use drover_core::error::Result;

/// The lane's row, made if missing and locked: the lane's virtual time.
const FAIR_LOCK: &str = "
INSERT INTO fair_passes (lane, tenant_id, pass) VALUES ($1, 'ffffffff-ffff-ffff-ffff-ffffffffffff', 0)
ON CONFLICT (lane, tenant_id) DO UPDATE SET pass = fair_passes.pass
RETURNING pass, started";
/// [`FAIR_LOCK`] with the flow settings' generation read in the same
/// statement (one round trip less for the plain fair claim).
static FAIR_LOCK_GEN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("{FAIR_LOCK_CTE}\nSELECT l.pass, l.started, {FLOW_GEN_COLUMN} FROM l")
});
/// The fair claim's write of the chosen ($1 ids, $2 worker, $3 lease
/// seconds, as `limit_claim.sql`) with the moved passes of lane $4 ($5
/// tenants, $6 passes, $7 starts or, for the lane's row, its new version
/// token) in the same statement.
static FAIR_CLAIM_WRITE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH w AS (
    INSERT INTO fair_passes (lane, tenant_id, pass, started)
    SELECT $4, t, p, n FROM unnest($5::uuid[], $6::bigint[], $7::bigint[]) AS w(t, p, n)
    ON CONFLICT (lane, tenant_id) DO UPDATE
    SET pass = excluded.pass,
        started = CASE WHEN fair_passes.tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                       THEN excluded.started
                       ELSE fair_passes.started + excluded.started END)
{LIMIT_CLAIM}"
    )
});
/// The tenants with pending items in lane $1: a loose scan of
/// `items_fair`, one descent per tenant.
const FAIR_TENANTS: &str = "
WITH RECURSIVE t AS (
    (SELECT tenant_id FROM items WHERE lane = $1 AND status = 'pending'
     ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT n.tenant_id FROM t CROSS JOIN LATERAL (
        SELECT i.tenant_id FROM items i
        WHERE i.lane = $1 AND i.status = 'pending' AND i.tenant_id > t.tenant_id
        ORDER BY i.tenant_id LIMIT 1) n
)
SELECT tenant_id FROM t";

/// The tenants with pending items in `lane` ([`FAIR_TENANTS`]).
async fn read_tenants(
    tx: &mut sqlx::PgConnection,
    lane: &str,
    persistent: bool,
) -> Result<Vec<Uuid>> {
    Ok(sqlx::query_scalar(FAIR_TENANTS)
        .persistent(persistent)
        .bind(lane)
        .fetch_all(tx)
        .await?)
}

/// The lane's passes (a range of the primary key), its own row included.
const FAIR_PASSES: &str = "SELECT tenant_id, pass FROM fair_passes WHERE lane = $1";
const FAIR_PASS_WRITE: &str = "
INSERT INTO fair_passes (lane, tenant_id, pass, started)
SELECT $1, t, p, n FROM unnest($2::uuid[], $3::bigint[], $4::bigint[]) AS w(t, p, n)
ON CONFLICT (lane, tenant_id) DO UPDATE
SET pass = excluded.pass,
    started = CASE WHEN fair_passes.tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                   THEN excluded.started
                   ELSE fair_passes.started + excluded.started END";

/// Each tenant $2[k]'s next due items of lane $1 in claim order, of its
/// group $3[k] at most $4[k], of the kinds $5; `{group}` is the group
/// filter (a named group through `items_fair_group`, or the ungrouped
/// items).
const FAIR_GROUP_CANDIDATES: &str = "
SELECT c.id, c.tenant_id, c.group_key, c.priority, c.available_at
FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS q(tenant_id, group_key, cap)
CROSS JOIN LATERAL (
    SELECT i.id, i.tenant_id, i.group_key, i.priority, i.available_at FROM items i
    WHERE i.lane = $1 AND i.status = 'pending' AND i.tenant_id = q.tenant_id AND {group}
      AND i.available_at <= now()
      AND (cardinality($5::text[]) = 0 OR i.kind = ANY($5))
    ORDER BY i.priority, i.available_at
    LIMIT q.cap) c";
/// A named group's filter, as a range of one key rather than an
/// equality. Why: the kept generic plan holds an equality on the group as
/// selective as the average group, so with few groups it walked
/// `items_fair` (lane, tenant, priority, age) and filtered by group, past
/// every item of the tenant's other groups (a small group behind a group
/// of 300,000: 299,812 rows read past, 59.7 ms). A range leaves the group
/// in the order ([`NAMED_GROUP_ORDER`]), which only `items_fair_group`
/// gives without a sort: 0.36 ms on the same rows.
pub(super) const NAMED_GROUP: &str =
    "i.group_key IS NOT NULL AND i.group_key >= q.group_key AND i.group_key <= q.group_key";
/// The claim order of a named group's read (the group first: one key, so
/// the same order as priority then age).
pub(super) const NAMED_GROUP_ORDER: &str = "ORDER BY i.group_key, i.priority, i.available_at";

static FAIR_NAMED_CANDIDATES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    FAIR_GROUP_CANDIDATES
        .replace("{group}", NAMED_GROUP)
        .replace("ORDER BY i.priority, i.available_at", NAMED_GROUP_ORDER)
});
/// The named groups' read as run (for the splice test).
#[cfg(test)]
pub(super) fn named_candidates_sql() -> &'static str {
    FAIR_NAMED_CANDIDATES.as_str()
}
static FAIR_UNGROUPED_CANDIDATES: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| FAIR_GROUP_CANDIDATES.replace("{group}", "i.group_key IS NULL"));

/// The plain fair claim's reads of a tenant's groups.
struct Plain<'a> {
    p: &'a ClaimParams,
    persistent: bool,
}

impl super::fair_groups::GroupReader for Plain<'_> {
    type C = Candidate;

    async fn read(
        &mut self,
        tx: &mut sqlx::PgConnection,
        wants: &[(Uuid, String, i64)],
    ) -> Result<Vec<(Uuid, String, Candidate)>> {
        let sql = if wants.iter().any(|(_, k, _)| k.is_empty()) {
            FAIR_UNGROUPED_CANDIDATES.as_str()
        } else {
            FAIR_NAMED_CANDIDATES.as_str()
        };
        let (ts, keys, caps) = super::fair_groups::want_columns(wants);
        let rows = sqlx::query(sql)
            .persistent(self.persistent)
            .bind(&self.p.lane)
            .bind(&ts)
            .bind(&keys)
            .bind(&caps)
            .bind(&self.p.kinds)
            .fetch_all(&mut *tx)
            .await?;
        rows.iter()
            .map(|r| {
                let key = (r.try_get("priority")?, r.try_get("available_at")?);
                let g: Option<String> = r.try_get("group_key")?;
                let t: Uuid = r.try_get("tenant_id")?;
                Ok((t, g.unwrap_or_default(), (key, r.try_get("id")?)))
            })
            .collect()
    }
}

/// Each tenant's due items per lane, counted up to a cap (see the file).
const FAIR_WAITING: &str = include_str!("../../sql/postgres/fair_waiting.sql");

/// A write of passes: its version token, then the tenants, passes and
/// starts to upsert.
pub(super) type PassRows = (i64, Vec<Uuid>, Vec<i64>, Vec<i64>);

/// The rows a write of `passes` upserts (tenants, passes, starts; the
/// lane's row first, with a fresh version token in place of its starts),
/// and that token; `None` when no pass moved.
pub(super) fn pass_rows(passes: &Passes) -> Option<PassRows> {
    if passes.changed().is_empty() {
        return None;
    }
    let version = crate::fairness::pass_version();
    let mut t = vec![LANE_ROW];
    let mut pass = vec![passes.vt()];
    let mut n = vec![version];
    for (tenant, (pp, nn)) in passes.changed() {
        t.push(*tenant);
        pass.push(*pp);
        n.push(i64::try_from(*nn).unwrap_or(i64::MAX));
    }
    Some((version, t, pass, n))
}

impl PgStore {
    /// The fair-share settings, from the cache while it is fresh.
    pub(super) async fn fair_cached(&self) -> Result<std::sync::Arc<FairSettings>> {
        if let Some(v) = self.fair.fresh() {
            return Ok(v);
        }
        let s = self.fair_settings().await?;
        Ok(self.fair.put(s))
    }

    /// The tenants with pending work in `lane`, as last read within
    /// [`FAIR_CACHE_TTL`] (and since this process last enqueued).
    ///
    /// A list older than the TTL (at the same epoch) still serves while a
    /// background task reads it again: the read is one index descent per
    /// tenant (milliseconds at a thousand tenants), and a claim that paid
    /// for it was every slow claim of a lane with many tenants. A claim on
    /// a list that has since gone stale loses nothing it could not lose
    /// to the TTL already: a tenant listed with nothing due is passed over,
    /// and one not listed yet waits for the read (or this process's next
    /// enqueue, which voids the list).
    /// The second value: whether the list is older than the TTL.
    pub(super) async fn fair_tenants(&self, lane: &str) -> Result<(Arc<Vec<Uuid>>, bool)> {
        let epoch = self.fair_verdicts.epoch();
        match self.fair_verdicts.get(lane) {
            Some((t, false)) => return Ok((t, false)),
            Some((t, true)) => {
                if self.fair_verdicts.start_reading(lane) {
                    self.read_tenants_behind(lane, epoch).await;
                }
                return Ok((t, true));
            }
            None => {}
        }
        let began = std::time::Instant::now();
        let mut tx = self.begin_system().await?;
        let tenants = read_tenants(&mut tx, lane, self.persistent).await?;
        tx.commit().await?;
        let tenants = Arc::new(tenants);
        self.fair_verdicts
            .put(lane, epoch, tenants.clone(), began.elapsed());
        Ok((tenants, false))
    }

    /// Reads `lane`'s tenant list again in a task of its own, keeping it
    /// at `epoch` (a list read across an enqueue of this process is not
    /// kept: the enqueue moved the epoch). A failure leaves the old list
    /// until it passes [`STALE_LIST_LIMIT`](crate::fairness::STALE_LIST_LIMIT).
    async fn read_tenants_behind(&self, lane: &str, epoch: u64) {
        let begin = match self.system_begin_sql().await {
            Ok(sql) => sql,
            Err(e) => {
                tracing::debug!(target: "drover::postgres", error = %e, "fair share: tenant list not read");
                self.fair_verdicts.done_reading(lane);
                return;
            }
        };
        let pool = self.system_pool.clone();
        let verdicts = self.fair_verdicts.clone();
        let persistent = self.persistent;
        let lane = lane.to_owned();
        tokio::spawn(async move {
            let began = std::time::Instant::now();
            let read = async {
                let mut tx = crate::begin::begin(&pool, begin).await?;
                let tenants = read_tenants(&mut tx, &lane, persistent).await?;
                tx.commit().await?;
                Ok::<_, drover_core::error::Error>(tenants)
            };
            match read.await {
                Ok(tenants) => verdicts.put(&lane, epoch, Arc::new(tenants), began.elapsed()),
                Err(e) => {
                    tracing::debug!(target: "drover::postgres", error = %e, "fair share: tenant list not read");
                }
            }
            verdicts.done_reading(&lane);
        });
    }

    /// The next due items, in claim order, of each tenant the quotas of
    /// `passes` name among `alive` (a tenant with nothing due is dropped and
    /// the quotas drawn again: [`Rounds`]); in a lane shared by group
    /// (`by_group`), by the inner rule over each tenant's groups, with the
    /// groups' keys by id.
    async fn fair_lists(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        passes: &Passes,
        alive: Vec<(Uuid, u32)>,
        by_group: bool,
        first: Option<super::fair_first::FirstRound>,
    ) -> Result<(Works<Candidate>, HashMap<Uuid, String>)> {
        let mut lists: Works<Candidate> = BTreeMap::new();
        let mut names = HashMap::new();
        // The first round read with the lock (`fair_first.rs`), or none.
        let (mut rounds, mut first) = match first {
            Some(f) => (f.rounds, Some((f.fresh, f.lists))),
            None => (Rounds::new(alive), None),
        };
        loop {
            let fresh = match first.take() {
                Some((fresh, read)) => {
                    lists.extend(read);
                    if !settle_round(&mut rounds, &fresh, &lists) {
                        break;
                    }
                    continue;
                }
                None => round_caps(&mut rounds, passes, p.limit),
            };
            if fresh.is_empty() {
                break;
            }
            if by_group {
                let mut reader = Plain {
                    p,
                    persistent: self.persistent,
                };
                let quotas: Vec<(Uuid, u32)> = fresh.iter().map(|f| (f.0, f.1)).collect();
                let (work, n) = self
                    .tenants_work(tx, &p.lane, &quotas, (PER_START, EXTRA), &mut reader)
                    .await?;
                names.extend(n);
                lists.extend(work);
            } else {
                let (ts, rows) =
                    read_round(tx, FAIR_CANDIDATES, self.persistent, p, &fresh).await?;
                lists.extend(candidate_lists(&ts, &rows)?);
            }
            if !settle_round(&mut rounds, &fresh, &lists) {
                break;
            }
        }
        Ok((lists, names))
    }

    /// The lane's row (locked by [`FAIR_LOCK`]) and its passes, as
    /// [`Passes`]: as this process kept them while the lane's row holds
    /// the version token they were kept at
    /// ([`PassCache`](crate::fairness::PassCache)), else read.
    pub(super) async fn passes_locked(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
    ) -> Result<Passes> {
        let (vt, version): (i64, i64) = sqlx::query_as(FAIR_LOCK)
            .persistent(self.persistent)
            .bind(lane)
            .fetch_one(&mut *tx)
            .await?;
        self.passes_at(tx, lane, vt, version).await
    }

    /// [`PgStore::passes_locked`] with the flow settings' generation read
    /// in the lock's statement (`None` without its row).
    async fn passes_locked_gen(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
    ) -> Result<(Passes, Option<i64>)> {
        let (vt, version, now_gen): (i64, i64, Option<i64>) =
            sqlx::query_as(FAIR_LOCK_GEN.as_str())
                .persistent(self.persistent)
                .bind(lane)
                .fetch_one(&mut *tx)
                .await?;
        Ok((self.passes_at(tx, lane, vt, version).await?, now_gen))
    }

    /// The lane's passes under its locked row (virtual time `vt`, version
    /// token `version`): kept, or read and kept.
    pub(super) async fn passes_at(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
        vt: i64,
        version: i64,
    ) -> Result<Passes> {
        // The lane's row holds the token of the last write of its passes:
        // this process's own (nobody wrote since), or read them all.
        if let Some(passes) = self.fair_passes.get(lane, version) {
            return Ok(passes);
        }
        let rows: Vec<(Uuid, i64)> = sqlx::query_as(FAIR_PASSES)
            .persistent(self.persistent)
            .bind(lane)
            .fetch_all(&mut *tx)
            .await?;
        let stored = rows.into_iter().filter(|(t, _)| *t != LANE_ROW);
        let passes = Passes::new(vt, stored);
        self.fair_passes.put(lane, version, &passes);
        Ok(passes)
    }

    /// Writes back the passes a share moved and the lane's virtual time
    /// with a fresh version token, and keeps them at it (nothing when none
    /// moved).
    pub(super) async fn write_passes(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
        passes: &Passes,
    ) -> Result<()> {
        let Some((version, t, pass, n)) = pass_rows(passes) else {
            return Ok(());
        };
        sqlx::query(FAIR_PASS_WRITE)
            .persistent(self.persistent)
            .bind(lane)
            .bind(&t)
            .bind(&pass)
            .bind(&n)
            .execute(tx)
            .await?;
        self.fair_passes.put(lane, version, passes);
        Ok(())
    }

    /// The fair claim of `p` (see the module docs), or `None` when fair
    /// share is off for the lane or its work is one tenant's.
    pub(super) async fn claim_fair(
        &self,
        p: &ClaimParams,
        in_force: &InForce,
    ) -> Result<Option<Attempt>> {
        let fair = self.fair_cached().await?;
        if !fair.on(&p.lane) {
            return Ok(None);
        }
        let (tenants, stale) = self.fair_tenants(&p.lane).await?;
        // A lane shared by group shares one tenant's starts too.
        let least = if fair.by_group(&p.lane) { 1 } else { 2 };
        if tenants.len() < least {
            return Ok(None);
        }
        let attempt = self.claim_fair_with(p, in_force, &fair, &tenants).await?;
        // A list being read again named only tenants with nothing due:
        // read it now, so a tenant it misses is not left for the poll.
        if stale && matches!(&attempt, Attempt::Items(items) if items.is_empty()) {
            self.fair_verdicts.forget(&p.lane);
            let (tenants, _) = self.fair_tenants(&p.lane).await?;
            if tenants.len() < least {
                return Ok(None);
            }
            return self
                .claim_fair_with(p, in_force, &fair, &tenants)
                .await
                .map(Some);
        }
        Ok(Some(attempt))
    }

    /// The fair claim of `p` among `alive` (each tenant with its weight)
    /// as a transaction of statements under the lane's lock.
    pub(super) async fn claim_fair_locked(
        &self,
        p: &ClaimParams,
        in_force: &InForce,
        fair: &FairSettings,
        alive: Vec<(Uuid, u32)>,
    ) -> Result<Attempt> {
        let mut tx = self.begin_system_generic().await?;
        let fgen = in_force.flow_gen;
        // The generation is read in the statement that locks the lane's
        // row: a change committed before it is seen, as when it was read
        // first (docs/flow-control.md, "the flow settings' generation").
        let by_group = fair.by_group(&p.lane);
        // With the passes this process kept, the first round's candidates
        // are read in the lock's statement (`fair_first.rs`).
        let (mut passes, now_gen, first) = match (by_group, self.fair_passes.latest(&p.lane)) {
            (false, Some(kept)) => self.lock_with_first_read(&mut tx, p, &alive, kept).await?,
            _ => {
                let (passes, now_gen) = self.passes_locked_gen(&mut tx, &p.lane).await?;
                (passes, now_gen, None)
            }
        };
        if fgen.is_some() && now_gen != fgen {
            tx.commit().await?;
            return Ok(Attempt::Stale);
        }
        let (lists, names) = self
            .fair_lists(&mut tx, p, &passes, alive, by_group, first)
            .await?;
        let lists = lists
            .into_iter()
            .map(|(t, l)| (t, fair.weight(t), l))
            .collect();
        let (chosen, inner) = passes.share_work(lists, p.limit as usize, |c| c.0, |_| true);
        self.write_group_passes(&mut tx, &p.lane, &inner, &names)
            .await?;
        let ids: Vec<Uuid> = chosen.iter().map(|c| c.1).collect();
        // The claim and the moved passes in one statement (a pass moves
        // only for a start, so with no id there is nothing to write).
        let rows = match (ids.is_empty(), pass_rows(&passes)) {
            (true, _) => Vec::new(),
            (false, Some((version, t, pass, n))) => {
                let rows = sqlx::query(FAIR_CLAIM_WRITE.as_str())
                    .persistent(self.persistent)
                    .bind(&ids)
                    .bind(&p.worker_id)
                    .bind(secs(p.lease))
                    .bind(&p.lane)
                    .bind(&t)
                    .bind(&pass)
                    .bind(&n)
                    .fetch_all(&mut *tx)
                    .await?;
                self.fair_passes.put(&p.lane, version, &passes);
                rows
            }
            (false, None) => self.claim_ids(&mut tx, &ids, p).await?,
        };
        tx.commit().await?;
        let items = rows.iter().map(row::item).collect::<Result<Vec<_>>>()?;
        Ok(Attempt::Items(items))
    }
}

#[async_trait]
impl FairnessStore for PgStore {
    async fn fair_weight_set(&self, tenant: Uuid, weight: u32, actor: Uuid) -> Result<FairWeight> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(
            "INSERT INTO fair_weights (tenant_id, weight, set_by) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id) DO UPDATE
             SET weight = excluded.weight, set_at = now(), set_by = excluded.set_by
             RETURNING set_at",
        )
        .persistent(self.persistent)
        .bind(tenant)
        .bind(i32::try_from(weight).unwrap_or(i32::MAX))
        .bind(actor)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        self.fair.clear();
        Ok(FairWeight {
            tenant,
            weight,
            set_at: r.try_get("set_at")?,
            set_by: actor,
        })
    }

    async fn fair_weight_clear(&self, tenant: Uuid) -> Result<bool> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query("DELETE FROM fair_weights WHERE tenant_id = $1")
            .persistent(self.persistent)
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
        let by_group = on && by_group;
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(
            "INSERT INTO fair_lanes (lane, fair, by_group, set_by) VALUES ($1, $2, $4, $3)
             ON CONFLICT (tenant_id, lane) DO UPDATE
             SET fair = excluded.fair, by_group = excluded.by_group, set_at = now(),
                 set_by = excluded.set_by
             RETURNING set_at",
        )
        .persistent(self.persistent)
        .bind(lane)
        .bind(on)
        .bind(actor)
        .bind(by_group)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        self.fair.clear();
        Ok(FairLane {
            lane: lane.to_owned(),
            on,
            by_group,
            set_at: r.try_get("set_at")?,
            set_by: actor,
        })
    }

    async fn fair_settings(&self) -> Result<FairSettings> {
        let mut tx = self.begin_system().await?;
        let w = sqlx::query(
            "SELECT tenant_id, weight, set_at, set_by FROM fair_weights ORDER BY tenant_id",
        )
        .persistent(self.persistent)
        .fetch_all(&mut *tx)
        .await?;
        let l = sqlx::query(
            // by_group read through the row's JSON: a schema before
            // migration 0056 has no such column (a new binary drains on
            // it until the migration; its lanes share by tenant), and
            // the statement's result type stays the same across it.
            "SELECT lane, fair, set_at, set_by,
                    coalesce(to_jsonb(l) -> 'by_group' = 'true'::jsonb, false) AS by_group
             FROM fair_lanes l ORDER BY lane",
        )
        .persistent(self.persistent)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut out = FairSettings::default();
        for r in &w {
            out.weights.push(FairWeight {
                tenant: r.try_get("tenant_id")?,
                weight: u32::try_from(r.try_get::<i32, _>("weight")?).unwrap_or(1),
                set_at: r.try_get("set_at")?,
                set_by: r.try_get("set_by")?,
            });
        }
        for r in &l {
            out.lanes.push(FairLane {
                lane: r.try_get("lane")?,
                on: r.try_get("fair")?,
                by_group: r.try_get("by_group")?,
                set_at: r.try_get("set_at")?,
                set_by: r.try_get("set_by")?,
            });
        }
        Ok(out)
    }

    async fn fair_shares(&self) -> Result<Vec<FairShare>> {
        let settings = self.fair_settings().await?;
        let mut tx = self.begin_system().await?;
        let waiting = sqlx::query(FAIR_WAITING)
            .persistent(self.persistent)
            .bind(i64::try_from(FAIR_WAITING_CAP).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        let passes = sqlx::query("SELECT lane, tenant_id, pass, started FROM fair_passes")
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
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
        let mut tx = self.begin_system().await?;
        // Every lane's row first, in lane order: a claim locks its lane's row
        // before it writes its tenants' rows, so deleting tenants' rows first
        // and bumping the lane's token after them waited in a cycle with it
        // (PostgreSQL's deadlock detector ended one of the two).
        sqlx::query(
            "SELECT lane FROM fair_passes
             WHERE tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'
             ORDER BY lane FOR UPDATE",
        )
        .persistent(self.persistent)
        .fetch_all(&mut *tx)
        .await?;
        // The groups' idle passes (a claim writes them under its lane's
        // row, locked above); none on a schema before migration 0056.
        let has_groups: bool =
            sqlx::query_scalar("SELECT to_regclass('fair_group_passes') IS NOT NULL")
                .persistent(self.persistent)
                .fetch_one(&mut *tx)
                .await?;
        let groups = if has_groups {
            sqlx::query(super::fair_groups::GROUP_PURGE)
                .persistent(self.persistent)
                .bind(i64::from(batch))
                .execute(&mut *tx)
                .await?
                .rows_affected()
        } else {
            0
        };
        let batch = batch.saturating_sub(u32::try_from(groups).unwrap_or(u32::MAX));
        // Idle rows: at or behind their lane's virtual time, or of a tenant
        // with nothing pending in the lane (it comes back lifted to the
        // virtual time, at most one start ahead of its row's place).
        let n = sqlx::query(
            "DELETE FROM fair_passes p USING (
                 SELECT q.lane, q.tenant_id FROM fair_passes q
                 JOIN fair_passes v ON v.lane = q.lane
                  AND v.tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                 WHERE q.tenant_id <> 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                   AND (q.pass <= v.pass
                        OR NOT EXISTS (SELECT 1 FROM items i WHERE i.lane = q.lane
                                       AND i.tenant_id = q.tenant_id AND i.status = 'pending'))
                 LIMIT $1) d
             WHERE p.lane = d.lane AND p.tenant_id = d.tenant_id",
        )
        .persistent(self.persistent)
        .bind(i64::from(batch))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            // A claimer's kept passes name the rows just deleted (a purged
            // tenant comes back level with the virtual time): a fresh token
            // makes every claimer read the passes again.
            sqlx::query(
                "UPDATE fair_passes SET started = $1
                 WHERE tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'",
            )
            .persistent(self.persistent)
            .bind(crate::fairness::pass_version())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(n + groups)
    }
}
