//! Fair share on the claims a concurrency limit or a rate applies to, on
//! SQLite: the limited claim (`limits.rs`) with the fair claim's order
//! (`fairness.rs`), on the single writer's transaction, so counting the
//! held slots, reading the cells and the passes, sharing the starts and
//! writing them back are one step no other claimer interleaves with (the
//! limits stay as exact as the limited claim's).
//!
//! A lane whose pending work is one tenant's (by the lane's tenant list,
//! kept as the fair claim keeps it) claims as the limited claim does.
//! Otherwise: the held
//! slots and the rate cells (the scopes full as the claim begins are left
//! out of the candidates), the lane's passes, each tenant's next due items
//! the quotas name (one page of the limited claim's candidates, through
//! `items_fair`), and [`Passes::share`] asks the admission (rates first,
//! then the slots) at each start: a candidate it refuses is skipped and its
//! tenant keeps its pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::fairness::{lane_tenants, read_passes, write_passes};
use super::limits::{
    FIRST_PAGE_EXTRA, FIRST_PAGE_PER_SLOT, Full, LIMIT_CANDIDATES, LIMIT_CLAIM, ordered_binds,
    row_keys, row_rate_keys,
};
use super::row::{self, after, to_micros};
use crate::ClaimParams;
use crate::fairness::{FairSettings, Rounds, TenantWork};
use crate::limits::{Admission, LimitSetting};
use crate::rates::{Rate, RateSetting};
use drover_core::error::{Error, Result};
use drover_core::item::Item;

/// One tenant's (?12) page of the limited claim's candidates, through
/// `items_fair`, with the ordered groups' head probe (its kinds ?10 NULL
/// while no ordered limit is in force: the probe is then never run).
static CANDIDATES_OF_TENANT: LazyLock<String> = LazyLock::new(|| {
    LIMIT_CANDIDATES
        .replace(
            "FROM items i INDEXED BY items_pending",
            "FROM items i INDEXED BY items_fair",
        )
        .replace(
            "AND i.lane = ?1\n",
            "AND i.lane = ?1\n  AND i.tenant_id = ?12\n",
        )
        .replace(
            "/*{ordered}*/",
            include_str!("../../sql/sqlite/limit_candidates_head.sql"),
        )
});

/// A candidate read: its id, slot keys and rate keys.
type Read = (Uuid, Vec<(String, u32)>, Vec<(String, Rate)>);
/// Per tenant, its candidates' claim order keys and indexes.
type Lists = BTreeMap<Uuid, TenantWork<Candidate>>;

/// What a tenant's page of candidates is read under.
struct Page<'a> {
    p: &'a ClaimParams,
    now: DateTime<Utc>,
    kinds: Option<&'a str>,
    full: &'a Full,
    ordered: Option<&'a str>,
    hold: Option<&'a str>,
    limits: &'a [LimitSetting],
    rates: &'a [RateSetting],
}

/// [`CANDIDATES_OF_TENANT`] of the tenant's group ?13, through
/// `items_fair_group`.
static CANDIDATES_OF_GROUP: LazyLock<String> = LazyLock::new(|| {
    CANDIDATES_OF_TENANT
        .replace("INDEXED BY items_fair\n", "INDEXED BY items_fair_group\n")
        .replace(
            "AND i.tenant_id = ?12\n",
            "AND i.tenant_id = ?12 AND i.group_key IS NOT NULL AND i.group_key = ?13\n",
        )
});
/// [`CANDIDATES_OF_TENANT`] of the tenant's ungrouped items.
static CANDIDATES_UNGROUPED: LazyLock<String> = LazyLock::new(|| {
    CANDIDATES_OF_TENANT.replace(
        "AND i.tenant_id = ?12\n",
        "AND i.tenant_id = ?12 AND i.group_key IS NULL\n",
    )
});

/// A candidate of the share: its claim order key and its index among the
/// read candidates.
type Candidate = ((i64, i64, i64), usize);

/// The reads of a tenant's pages, gathering every candidate read.
struct Reader<'a, 'b> {
    page: &'b Page<'a>,
    candidates: Vec<Read>,
}

impl Reader<'_, '_> {
    /// `tenant`'s page for `quota` starts: of group `group` (`''`: its
    /// ungrouped items) or of any (`None`).
    async fn page_of(
        &mut self,
        conn: &mut SqliteConnection,
        tenant: Uuid,
        group: Option<&str>,
        quota: u32,
    ) -> Result<Vec<Candidate>> {
        let page = self.page;
        let size = i64::from(quota)
            .saturating_mul(FIRST_PAGE_PER_SLOT)
            .saturating_add(FIRST_PAGE_EXTRA);
        let sql = match group {
            None => CANDIDATES_OF_TENANT.as_str(),
            Some("") => CANDIDATES_UNGROUPED.as_str(),
            Some(_) => CANDIDATES_OF_GROUP.as_str(),
        };
        let mut q = sqlx::query(sql)
            .bind(&page.p.lane)
            .bind(to_micros(page.now))
            .bind(page.kinds)
            .bind(size)
            .bind(i64::MIN)
            .bind(i64::MIN)
            .bind(i64::MIN)
            .bind(page.full.kinds.as_deref())
            .bind(page.full.groups.as_deref())
            .bind(page.ordered)
            .bind(page.hold)
            .bind(tenant);
        if let Some(g) = group.filter(|g| !g.is_empty()) {
            q = q.bind(g);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            let key: (i64, i64, i64) = (
                r.try_get("priority")?,
                r.try_get("available_at")?,
                r.try_get("rid")?,
            );
            list.push((key, self.candidates.len()));
            let id: Uuid = r.try_get("id")?;
            self.candidates
                .push((id, row_keys(page.limits, r)?, row_rate_keys(page.rates, r)?));
        }
        Ok(list)
    }
}

impl super::fair_groups::GroupReader for Reader<'_, '_> {
    type C = Candidate;

    async fn read(
        &mut self,
        conn: &mut SqliteConnection,
        tenant: Uuid,
        key: &str,
        quota: u32,
    ) -> Result<Vec<Candidate>> {
        self.page_of(conn, tenant, Some(key), quota).await
    }
}

/// The candidates of each tenant the quotas of `passes` name among
/// `alive`, and per tenant its work (by group in a lane shared by group)
/// and the groups' keys by id. A tenant with nothing due is dropped and
/// the quotas drawn again (the list holds every tenant with pending
/// work, and may be up to `FAIR_CACHE_TTL` old).
async fn read_lists(
    conn: &mut SqliteConnection,
    store: &super::SqliteStore,
    page: &Page<'_>,
    passes: &crate::fairness::Passes,
    alive: Vec<(Uuid, u32)>,
    by_group: bool,
) -> Result<(Vec<Read>, Lists, HashMap<Uuid, String>)> {
    let mut reader = Reader {
        page,
        candidates: Vec::new(),
    };
    let mut lists: Lists = BTreeMap::new();
    let mut names = HashMap::new();
    let mut rounds = Rounds::new(alive);
    loop {
        let fresh = rounds.next(passes, page.p.limit);
        if fresh.is_empty() {
            break;
        }
        if by_group {
            let (work, n) =
                super::fair_groups::tenants_work(conn, store, &page.p.lane, &fresh, &mut reader)
                    .await?;
            names.extend(n);
            lists.extend(work);
        } else {
            for (t, q) in &fresh {
                let work = TenantWork::Items(reader.page_of(conn, *t, None, *q).await?);
                lists.insert(*t, work);
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
    Ok((reader.candidates, lists, names))
}

/// The limited claim of `p` shared fairly between the tenants of its lane
/// on the open write transaction at `now` (see the module docs), or
/// `None` when fair share is off for the lane or fewer than two tenants
/// have due work in it (the caller runs the limited claim).
pub(super) async fn claim_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    limits: &[LimitSetting],
    rates: &[RateSetting],
    now: DateTime<Utc>,
    fair: &FairSettings,
    store: &super::SqliteStore,
) -> Result<Option<Vec<Item>>> {
    if !fair.on(&p.lane) {
        return Ok(None);
    }
    let (tenants, _) = lane_tenants(conn, store, &p.lane).await?;
    // A lane shared by group shares one tenant's starts too.
    let by_group = fair.by_group(&p.lane);
    if tenants.len() < if by_group { 1 } else { 2 } {
        return Ok(None);
    }
    let kinds = if p.kinds.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&p.kinds).map_err(|e| Error::invalid("kinds", e.to_string()))?)
    };
    let Some((held, mut cells, full)) = super::limits::opening(conn, p, limits, rates, now).await?
    else {
        return Ok(Some(Vec::new()));
    };
    let mut admission = Admission::new(held);
    let (ordered, hold) = ordered_binds(limits)?;
    let mut passes = read_passes(conn, store, &p.lane).await?;
    let weighted: Vec<(Uuid, u32)> = tenants.iter().map(|t| (*t, fair.weight(*t))).collect();
    let page = Page {
        p,
        now,
        kinds: kinds.as_deref(),
        full: &full,
        ordered: ordered.as_deref(),
        hold: hold.as_deref(),
        limits,
        rates,
    };
    let (candidates, lists, names) =
        read_lists(conn, store, &page, &passes, weighted, by_group).await?;
    let lists = lists
        .into_iter()
        .map(|(t, l)| (t, fair.weight(t), l))
        .collect();
    let (chosen, inner) = passes.share_work(
        lists,
        p.limit as usize,
        |c| c.0,
        |c| {
            let (_, keys, rated) = &candidates[c.1];
            // Rates first: a start the rate holds back takes no slot.
            if !cells.would_admit(rated) || !admission.admit(keys) {
                return false;
            }
            cells.admit(rated);
            true
        },
    );
    cells.note_rate_limited();
    write_passes(conn, store, &p.lane, &passes).await?;
    super::fair_groups::write_group_passes(conn, &p.lane, &inner, &names).await?;
    if chosen.is_empty() {
        return Ok(Some(Vec::new()));
    }
    super::rates::write_cells(conn, cells.changed()).await?;
    let ids: Vec<String> = chosen
        .iter()
        .map(|c| candidates[c.1].0.simple().to_string())
        .collect();
    let ids = serde_json::to_string(&ids).map_err(|e| Error::invalid("ids", e.to_string()))?;
    let rows = sqlx::query(LIMIT_CLAIM)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The tenant's page is the limited claim's statement with the
    /// tenant's index, its filter and the head probe spliced in.
    #[test]
    fn candidates_of_tenant_spliced() {
        let q = CANDIDATES_OF_TENANT.as_str();
        assert!(q.contains("INDEXED BY items_fair"));
        assert!(q.contains("AND i.tenant_id = ?12"));
        assert!(q.contains("items_group_order"));
        assert!(!q.contains("/*{ordered}*/"));
        let g = CANDIDATES_OF_GROUP.as_str();
        assert!(g.contains("INDEXED BY items_fair_group\n"));
        assert!(g.contains("AND i.group_key IS NOT NULL AND i.group_key = ?13"));
        let u = CANDIDATES_UNGROUPED.as_str();
        assert!(u.contains("INDEXED BY items_fair\n"));
        assert!(u.contains("AND i.tenant_id = ?12 AND i.group_key IS NULL"));
    }
}
