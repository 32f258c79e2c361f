//! Fair share by group on SQLite (migration 0056): in a lane shared by
//! group, the fair claims (`fairness.rs`, `fair_limited.rs`) build each
//! tenant's candidates by the inner stride rule over its groups
//! ([`crate::fairness::groups`]) instead of one page in claim order.
//!
//! Per tenant the quotas name: its groups with pending work in the lane
//! (kept per process for [`FAIR_CACHE_TTL`](crate::fairness::FAIR_CACHE_TTL)
//! and voided by this process's enqueues, as the tenant list; read by a
//! loose scan of `items_fair_group`, one descent per group, and for the
//! ungrouped bucket one probe of `items_fair`), its inner passes (its rows
//! of `fair_group_passes`), [`Passes::quotas`] over its groups, and each
//! named group's next items (one descent of `items_fair_group`; the
//! ungrouped bucket through `items_fair`, reading past the tenant's
//! grouped items). A group with nothing due is dropped and the quotas
//! drawn again ([`Rounds`]). The moved inner passes are written on the
//! claim's transaction.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sqlx::SqliteConnection;
use uuid::Uuid;

use super::SqliteStore;
use crate::fairness::groups;
use crate::fairness::{Passes, TenantWork};
use drover_core::error::Result;

/// The groups with pending items of tenant ?2 in lane ?1 (a loose scan
/// of `items_fair_group`), and `''` when it has ungrouped pending items
/// (a probe of `items_fair`, which reads past the tenant's grouped items
/// until it finds one).
const TENANT_GROUPS: &str = "
WITH RECURSIVE g(k) AS (
    SELECT (SELECT group_key FROM items INDEXED BY items_fair_group
            WHERE lane = ?1 AND tenant_id = ?2 AND status = 'pending'
              AND group_key IS NOT NULL
            ORDER BY group_key LIMIT 1)
    UNION ALL
    SELECT (SELECT i.group_key FROM items i INDEXED BY items_fair_group
            WHERE i.lane = ?1 AND i.tenant_id = ?2 AND i.status = 'pending'
              AND i.group_key IS NOT NULL AND i.group_key > g.k
            ORDER BY i.group_key LIMIT 1)
    FROM g WHERE g.k IS NOT NULL
)
SELECT k FROM g WHERE k IS NOT NULL
UNION ALL
SELECT '' WHERE EXISTS (SELECT 1 FROM items INDEXED BY items_fair
                        WHERE lane = ?1 AND tenant_id = ?2 AND status = 'pending'
                          AND group_key IS NULL)";
const GROUP_PASSES: &str =
    "SELECT group_key, pass FROM fair_group_passes WHERE lane = ?1 AND tenant_id = ?2";
const GROUP_PASSES_ALL: &str = "SELECT group_key, pass, started FROM fair_group_passes
     WHERE lane = ?1 AND tenant_id = ?2 ORDER BY group_key";
/// Idle group passes, at most ?1: at or behind the tenant's group virtual
/// time or with nothing pending in the group; a virtual time's own row
/// once the tenant has nothing pending in the lane.
const GROUP_PURGE: &str = "
DELETE FROM fair_group_passes WHERE rowid IN (
    SELECT p.rowid FROM fair_group_passes p
    LEFT JOIN fair_group_passes v ON v.lane = p.lane AND v.tenant_id = p.tenant_id
                                 AND v.group_key = '*'
    WHERE (p.group_key = '*'
           AND NOT EXISTS (SELECT 1 FROM items i INDEXED BY items_fair
                           WHERE i.lane = p.lane AND i.tenant_id = p.tenant_id
                             AND i.status = 'pending'))
       OR (p.group_key <> '*'
           AND (p.pass <= coalesce(v.pass, 0)
                OR (p.group_key <> '' AND NOT EXISTS (
                        SELECT 1 FROM items i INDEXED BY items_fair_group
                        WHERE i.lane = p.lane AND i.tenant_id = p.tenant_id
                          AND i.status = 'pending' AND i.group_key = p.group_key))
                OR (p.group_key = '' AND NOT EXISTS (
                        SELECT 1 FROM items i INDEXED BY items_fair
                        WHERE i.lane = p.lane AND i.tenant_id = p.tenant_id
                          AND i.status = 'pending' AND i.group_key IS NULL))))
    LIMIT ?1)";

/// How a fair claim reads one group's next due items of a tenant.
pub(super) trait GroupReader {
    /// A candidate of the share.
    type C;
    /// `tenant`'s next due items of group `key` ([`groups::NO_GROUP`]:
    /// its ungrouped items) in claim order, at most as many as `quota`
    /// starts call for.
    async fn read(
        &mut self,
        conn: &mut SqliteConnection,
        tenant: Uuid,
        key: &str,
        quota: u32,
    ) -> Result<Vec<Self::C>>;
}

/// The reads of [`groups::tenants_work`] on a claim's transaction.
struct Reads<'a, R> {
    conn: &'a mut SqliteConnection,
    store: &'a SqliteStore,
    lane: &'a str,
    reader: &'a mut R,
}

impl<R: GroupReader> groups::GroupReads for Reads<'_, R> {
    type C = R::C;

    async fn groups(&mut self, tenant: Uuid) -> Result<(Arc<groups::GroupList>, bool)> {
        let lists = &self.store.fair_lists;
        let epoch = lists.epoch();
        if let Some(g) = lists.groups(self.lane, tenant) {
            return Ok((g, true));
        }
        let keys: Vec<String> = sqlx::query_scalar(TENANT_GROUPS)
            .bind(self.lane)
            .bind(tenant)
            .fetch_all(&mut *self.conn)
            .await?;
        let keys = Arc::new(groups::group_list(keys));
        lists.put_groups(self.lane, tenant, epoch, keys.clone());
        Ok((keys, false))
    }

    async fn passes(&mut self, tenants: &[Uuid]) -> Result<Vec<(Uuid, String, i64)>> {
        let mut out = Vec::new();
        for t in tenants {
            let rows: Vec<(String, i64)> = sqlx::query_as(GROUP_PASSES)
                .bind(self.lane)
                .bind(*t)
                .fetch_all(&mut *self.conn)
                .await?;
            out.extend(rows.into_iter().map(|(k, p)| (*t, k, p)));
        }
        Ok(out)
    }

    async fn read(&mut self, wants: &[(Uuid, String, u32)]) -> Result<Vec<Vec<R::C>>> {
        let mut out = Vec::with_capacity(wants.len());
        for (t, key, q) in wants {
            out.push(self.reader.read(self.conn, *t, key, *q).await?);
        }
        Ok(out)
    }

    fn forget(&mut self, tenant: Uuid) {
        self.store.fair_lists.forget_groups(self.lane, tenant);
    }
}

/// The work in `lane` of each of `quotas` (a tenant and the starts the
/// claim may give it; [`groups::tenants_work`]), read on `conn` through
/// `reader`.
pub(super) async fn tenants_work<R: GroupReader>(
    conn: &mut SqliteConnection,
    store: &SqliteStore,
    lane: &str,
    quotas: &[(Uuid, u32)],
    reader: &mut R,
) -> Result<Works<R::C>> {
    let mut reads = Reads {
        conn,
        store,
        lane,
        reader,
    };
    groups::tenants_work(&mut reads, quotas).await
}

/// Per tenant its work, and every group's key by id.
pub(super) type Works<C> = (BTreeMap<Uuid, TenantWork<C>>, HashMap<Uuid, String>);

/// Writes back the inner passes a share moved (`names`: group ids to
/// keys), on the claim's transaction.
pub(super) async fn write_group_passes(
    conn: &mut SqliteConnection,
    lane: &str,
    inner: &BTreeMap<Uuid, Passes>,
    names: &HashMap<Uuid, String>,
) -> Result<()> {
    for (t, passes) in inner {
        for (key, pass, n) in groups::inner_rows(passes, names) {
            sqlx::query(
                "INSERT INTO fair_group_passes (lane, tenant_id, group_key, pass, started)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (lane, tenant_id, group_key) DO UPDATE
                 SET pass = excluded.pass, started = fair_group_passes.started + excluded.started",
            )
            .bind(lane)
            .bind(*t)
            .bind(key)
            .bind(pass)
            .bind(i64::try_from(n).unwrap_or(i64::MAX))
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

impl SqliteStore {
    /// The stored group passes of `tenant` in `lane`.
    pub(super) async fn group_passes(
        &self,
        lane: &str,
        tenant: Uuid,
    ) -> Result<Vec<(String, i64, u64)>> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(GROUP_PASSES_ALL)
            .bind(lane)
            .bind(tenant)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(k, p, n)| (k, p, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// Deletes up to `batch` idle group passes on `conn`; how many.
    pub(super) async fn group_passes_purge(conn: &mut SqliteConnection, batch: u32) -> Result<u64> {
        Ok(sqlx::query(GROUP_PURGE)
            .bind(i64::from(batch))
            .execute(&mut *conn)
            .await?
            .rows_affected())
    }
}
