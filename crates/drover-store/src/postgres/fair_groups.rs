//! Fair share by group on PostgreSQL (migration 0056): in a lane shared
//! by group, the fair claims (`fairness.rs`, `fair_limited.rs`) build
//! each tenant's candidates by the inner stride rule over its groups
//! ([`crate::fairness::groups`]) instead of one descent in claim order.
//!
//! Per tenant the quotas name, in the claim's transaction (under the
//! lane's locked pass row): its groups with pending work in the lane
//! (kept per process for [`FAIR_CACHE_TTL`](crate::fairness::FAIR_CACHE_TTL)
//! and voided by this process's enqueues, as the tenant list; read by a
//! loose scan of `items_fair_group`, one descent per group, and one probe
//! of `items_fair` for its ungrouped items), its rows of
//! `fair_group_passes`, and per round of inner quotas one statement with
//! a `LATERAL` descent of `items_fair_group` per named group (`LIMIT q`,
//! locked `SKIP LOCKED` on the limited claim) and, for the ungrouped
//! bucket, one descent of `items_fair` filtered on `group_key IS NULL`
//! (which reads past the tenant's grouped items). The moved inner passes
//! are written by one statement before the commit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use crate::fairness::groups::{self, NO_GROUP};
use crate::fairness::{Passes, TenantWork};

/// Per tenant its work, and every group's key by id.
pub(super) type Works<C> = (BTreeMap<Uuid, TenantWork<C>>, HashMap<Uuid, String>);
use drover_core::error::Result;

/// The groups with pending items of tenant $2 in lane $1 (a loose scan of
/// `items_fair_group`), and `''` when it has ungrouped pending items (a
/// probe of `items_fair`, reading past its grouped items).
const TENANT_GROUPS: &str = "
WITH RECURSIVE g AS (
    (SELECT group_key FROM items
     WHERE lane = $1 AND tenant_id = $2 AND status = 'pending' AND group_key IS NOT NULL
     ORDER BY group_key LIMIT 1)
    UNION ALL
    SELECT n.group_key FROM g CROSS JOIN LATERAL (
        SELECT i.group_key FROM items i
        WHERE i.lane = $1 AND i.tenant_id = $2 AND i.status = 'pending'
          AND i.group_key IS NOT NULL AND i.group_key > g.group_key
        ORDER BY i.group_key LIMIT 1) n
)
SELECT group_key FROM g
UNION ALL
SELECT '' WHERE EXISTS (SELECT 1 FROM items WHERE lane = $1 AND tenant_id = $2
                        AND status = 'pending' AND group_key IS NULL)";
const GROUP_PASSES: &str = "SELECT tenant_id, group_key, pass FROM fair_group_passes
     WHERE lane = $1 AND tenant_id = ANY($2)";
const GROUP_PASSES_ALL: &str = "SELECT group_key, pass, started FROM fair_group_passes
     WHERE lane = $1 AND tenant_id = $2 ORDER BY group_key";
const GROUP_PASS_WRITE: &str = "
INSERT INTO fair_group_passes (lane, tenant_id, group_key, pass, started)
SELECT $1, t, g, p, n FROM unnest($2::uuid[], $3::text[], $4::bigint[], $5::bigint[]) AS w(t, g, p, n)
ON CONFLICT (lane, tenant_id, group_key) DO UPDATE
SET pass = excluded.pass, started = fair_group_passes.started + excluded.started";
/// Idle group passes, at most $1: at or behind the tenant's group virtual
/// time or with nothing pending in the group; a virtual time's own row
/// once the tenant has nothing pending in the lane.
pub(super) const GROUP_PURGE: &str = "
DELETE FROM fair_group_passes d USING (
    SELECT p.lane, p.tenant_id, p.group_key FROM fair_group_passes p
    LEFT JOIN fair_group_passes v ON v.lane = p.lane AND v.tenant_id = p.tenant_id
                                 AND v.group_key = '*'
    WHERE (p.group_key = '*'
           AND NOT EXISTS (SELECT 1 FROM items i WHERE i.lane = p.lane
                           AND i.tenant_id = p.tenant_id AND i.status = 'pending'))
       OR (p.group_key <> '*'
           AND (p.pass <= coalesce(v.pass, 0)
                OR (p.group_key <> '' AND NOT EXISTS (
                        SELECT 1 FROM items i WHERE i.lane = p.lane
                        AND i.tenant_id = p.tenant_id AND i.status = 'pending'
                        AND i.group_key IS NOT NULL AND i.group_key = p.group_key))
                OR (p.group_key = '' AND NOT EXISTS (
                        SELECT 1 FROM items i WHERE i.lane = p.lane
                        AND i.tenant_id = p.tenant_id AND i.status = 'pending'
                        AND i.group_key IS NULL))))
    LIMIT $1) x
WHERE d.lane = x.lane AND d.tenant_id = x.tenant_id AND d.group_key = x.group_key";

/// How a fair claim reads its tenants' groups' next due items: one
/// statement over arrays of (tenant, cap, group key) for the named
/// groups, one for the ungrouped buckets.
pub(super) trait GroupReader {
    /// A candidate of the share.
    type C;
    /// The candidates of each of `wants` (tenant, group key, cap; all of
    /// named groups, or all of ungrouped buckets `''`), each with its
    /// tenant and group key.
    async fn read(
        &mut self,
        tx: &mut sqlx::PgConnection,
        wants: &[(Uuid, String, i64)],
    ) -> Result<Vec<(Uuid, String, Self::C)>>;
}

/// The reads of [`groups::tenants_work`] on a claim's transaction.
struct Reads<'a, R> {
    tx: &'a mut sqlx::PgConnection,
    store: &'a PgStore,
    lane: &'a str,
    per_start: u32,
    extra: u32,
    reader: &'a mut R,
}

impl<R: GroupReader> groups::GroupReads for Reads<'_, R> {
    type C = R::C;

    async fn groups(&mut self, tenant: Uuid) -> Result<(Arc<groups::GroupList>, bool)> {
        let lists = &self.store.fair_verdicts;
        let epoch = lists.epoch();
        if let Some(g) = lists.groups(self.lane, tenant) {
            return Ok((g, true));
        }
        let keys: Vec<String> = sqlx::query_scalar(TENANT_GROUPS)
            .persistent(self.store.persistent)
            .bind(self.lane)
            .bind(tenant)
            .fetch_all(&mut *self.tx)
            .await?;
        let keys = Arc::new(groups::group_list(keys));
        lists.put_groups(self.lane, tenant, epoch, keys.clone());
        Ok((keys, false))
    }

    async fn passes(&mut self, tenants: &[Uuid]) -> Result<Vec<(Uuid, String, i64)>> {
        Ok(sqlx::query_as(GROUP_PASSES)
            .persistent(self.store.persistent)
            .bind(self.lane)
            .bind(tenants)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn read(&mut self, wants: &[(Uuid, String, u32)]) -> Result<Vec<Vec<R::C>>> {
        let caps: Vec<(Uuid, String, i64)> = wants
            .iter()
            .map(|(t, k, q)| {
                let cap = q.saturating_mul(self.per_start).saturating_add(self.extra);
                (*t, k.clone(), i64::from(cap))
            })
            .collect();
        let mut by_want: HashMap<(Uuid, String), Vec<R::C>> = HashMap::new();
        let (none, named): (Vec<_>, Vec<_>) = caps.into_iter().partition(|(_, k, _)| k == NO_GROUP);
        for part in [named, none] {
            if part.is_empty() {
                continue;
            }
            for (t, k, c) in self.reader.read(self.tx, &part).await? {
                by_want.entry((t, k)).or_default().push(c);
            }
        }
        Ok(wants
            .iter()
            .map(|(t, k, _)| by_want.remove(&(*t, k.clone())).unwrap_or_default())
            .collect())
    }

    fn forget(&mut self, tenant: Uuid) {
        self.store.fair_verdicts.forget_groups(self.lane, tenant);
    }
}

impl PgStore {
    /// The work in `lane` of each of `quotas` (a tenant and the starts
    /// the claim may give it; [`groups::tenants_work`]), read on `tx`
    /// through `reader`, each group's cap `per_start` candidates per
    /// start plus `extra`.
    pub(super) async fn tenants_work<R: GroupReader>(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
        quotas: &[(Uuid, u32)],
        (per_start, extra): (u32, u32),
        reader: &mut R,
    ) -> Result<Works<R::C>> {
        let mut reads = Reads {
            tx,
            store: self,
            lane,
            per_start,
            extra,
            reader,
        };
        groups::tenants_work(&mut reads, quotas).await
    }

    /// Writes back the inner passes a share moved (`names`: group ids to
    /// keys), in the claim's transaction.
    pub(super) async fn write_group_passes(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
        inner: &BTreeMap<Uuid, Passes>,
        names: &HashMap<Uuid, String>,
    ) -> Result<()> {
        let (mut t, mut g, mut p, mut n) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (tenant, passes) in inner {
            for (key, pass, starts) in groups::inner_rows(passes, names) {
                t.push(*tenant);
                g.push(key);
                p.push(pass);
                n.push(i64::try_from(starts).unwrap_or(i64::MAX));
            }
        }
        if t.is_empty() {
            return Ok(());
        }
        sqlx::query(GROUP_PASS_WRITE)
            .persistent(self.persistent)
            .bind(lane)
            .bind(&t)
            .bind(&g)
            .bind(&p)
            .bind(&n)
            .execute(tx)
            .await?;
        Ok(())
    }

    /// The stored group passes of `tenant` in `lane` (system role).
    pub(super) async fn group_passes(
        &self,
        lane: &str,
        tenant: Uuid,
    ) -> Result<Vec<(String, i64, u64)>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(GROUP_PASSES_ALL)
            .persistent(self.persistent)
            .bind(lane)
            .bind(tenant)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let n = u64::try_from(r.try_get::<i64, _>("started")?).unwrap_or(0);
                Ok((r.try_get("group_key")?, r.try_get("pass")?, n))
            })
            .collect()
    }
}

/// `wants` (tenant, group key, cap) as the three arrays a group read
/// binds.
pub(super) fn want_columns(wants: &[(Uuid, String, i64)]) -> (Vec<Uuid>, Vec<&str>, Vec<i64>) {
    (
        wants.iter().map(|w| w.0).collect(),
        wants.iter().map(|w| w.1.as_str()).collect(),
        wants.iter().map(|w| w.2).collect(),
    )
}
