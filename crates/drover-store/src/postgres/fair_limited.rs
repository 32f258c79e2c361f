//! Fair share on the claims a concurrency limit or a rate applies to, on
//! PostgreSQL: the limited claim's steps (`limits.rs`) with the fair
//! claim's order (`fairness.rs`), in one system-role transaction.
//!
//! 1. the flow settings' generation, as every claim checks it;
//! 2. the claims holding slots and the scopes the rates hold back as the
//!    claim begins (left out of the candidates);
//! 3. the lane's own pass row, upserted and so locked (every fair claim of
//!    the lane is serialised on it), and the lane's passes;
//! 4. the next due items of each tenant the quotas name, in claim order,
//!    through `items_fair`, with the limited claim's filters and head
//!    probe, locked `SKIP LOCKED`;
//! 5. the scope keys of every candidate locked in hash order, the held
//!    slots counted again after the locks, and the rate cells locked;
//! 6. [`Passes::share`] gives the starts out tenant by tenant, asking the
//!    admission (rates first, then the slots) at each start: a candidate
//!    it refuses is skipped and its tenant keeps its pass; one `UPDATE`
//!    of the admitted, the moved cells and passes written, the commit.
//!
//! So the limits stay as exact as the limited claim's (the same locks,
//! count and admission), and the starts are shared by the same stride rule
//! as the plain fair claim. Lock order: the lane's pass row before the
//! scope keys; a claim that takes only scope keys (the one-tenant limited
//! claim, the handover) never waits for the pass row while holding them,
//! so no cycle of waits forms.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::Row;
use uuid::Uuid;

use super::claim_gen::Attempt;
use super::fair_rounds::Works;
use super::limits::{CANDIDATES_EXTRA, CANDIDATES_PER_SLOT, Full, Opened, Parts, parts};
use super::{PgStore, row};
use crate::ClaimParams;
use crate::fairness::{FairSettings, Passes, Rounds, TenantWork};
use crate::limits::{LimitSetting, OnDeadLetter, keys_of, ordered_kinds};
use crate::rates::{InForce, RateSetting};
use drover_core::error::Result;
use drover_core::item::Item;

const CANDIDATES_FAIR: &str = include_str!("../../sql/postgres/limit_candidates_fair.sql");
/// The per-tenant candidates with the ordered groups' head probe at its
/// mark (always: with no ordered limit its kinds are empty and the probe
/// is never run).
static CANDIDATES_FAIR_ORDERED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    CANDIDATES_FAIR.replace(
        "/*{ordered}*/",
        include_str!("../../sql/postgres/limit_candidates_head.sql"),
    )
});

/// [`CANDIDATES_FAIR_ORDERED`] over (tenant, cap, group key) triples
/// (`$11`), `{group}` the group filter.
static CANDIDATES_FAIR_GROUPS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    CANDIDATES_FAIR_ORDERED
        .replace(
            "unnest($3::uuid[], $10::bigint[]) AS q(tenant_id, cap)",
            "unnest($3::uuid[], $10::bigint[], $11::text[]) AS q(tenant_id, cap, group_key)",
        )
        .replace(
            "AND i.tenant_id = q.tenant_id\n",
            "AND i.tenant_id = q.tenant_id AND {group}\n",
        )
});
/// Of named groups, through `items_fair_group`.
static CANDIDATES_FAIR_NAMED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    CANDIDATES_FAIR_GROUPS
        .replace("{group}", super::fairness::NAMED_GROUP)
        .replace(
            "ORDER BY i.priority, i.available_at",
            super::fairness::NAMED_GROUP_ORDER,
        )
});
/// Of the ungrouped items.
static CANDIDATES_FAIR_UNGROUPED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| CANDIDATES_FAIR_GROUPS.replace("{group}", "i.group_key IS NULL"));

/// One candidate of the share: its claim order key and its index among
/// the read candidates.
type Candidate = ((i16, chrono::DateTime<chrono::Utc>, Uuid), usize);

/// The filters a tenant's candidates are read under.
struct Filters<'a> {
    p: &'a ClaimParams,
    full: &'a Full,
    ordered: Vec<&'a str>,
    hold: Vec<&'a str>,
}

/// The limited fair claim's reads of a tenant's groups, gathering every
/// candidate read.
struct Limited<'a, 'b> {
    f: &'b Filters<'a>,
    candidates: &'b mut Vec<Parts>,
}

impl super::fair_groups::GroupReader for Limited<'_, '_> {
    type C = Candidate;

    async fn read(
        &mut self,
        tx: &mut sqlx::PgConnection,
        wants: &[(Uuid, String, i64)],
    ) -> Result<Vec<(Uuid, String, Candidate)>> {
        let sql = if wants.iter().any(|(_, k, _)| k.is_empty()) {
            CANDIDATES_FAIR_UNGROUPED.as_str()
        } else {
            CANDIDATES_FAIR_NAMED.as_str()
        };
        let (ts, keys, caps) = super::fair_groups::want_columns(wants);
        let f = self.f;
        let rows = sqlx::query(sql)
            .persistent(false)
            .bind(&f.p.lane)
            .bind(&f.p.kinds)
            .bind(&ts)
            .bind(&f.full.kinds)
            .bind(&f.full.group_kinds)
            .bind(&f.full.group_tenants)
            .bind(&f.full.groups)
            .bind(&f.ordered)
            .bind(&f.hold)
            .bind(&caps)
            .bind(&keys)
            .fetch_all(&mut *tx)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let c = parts(r, true)?;
            let key = (r.try_get("priority")?, r.try_get("available_at")?, c.id);
            let group = c.group.clone().unwrap_or_default();
            out.push((c.tenant, group, (key, self.candidates.len())));
            self.candidates.push(c);
        }
        Ok(out)
    }
}

impl PgStore {
    /// The limited claim of `p` shared fairly between the tenants of its
    /// lane (`fair_limited.rs`), or `None` when fair share is off for the
    /// lane or its pending work is one tenant's (the limited claim in
    /// priority then age order is then the fair one).
    pub(super) async fn claim_limited_fair(
        &self,
        p: &ClaimParams,
        limits: &[LimitSetting],
        in_force: &InForce,
    ) -> Result<Option<Attempt>> {
        let fair = self.fair_cached().await?;
        if !fair.on(&p.lane) {
            return Ok(None);
        }
        let (rates, fgen) = (&in_force.rates, in_force.flow_gen);
        let (tenants, stale) = self.fair_tenants(&p.lane).await?;
        // A lane shared by group shares one tenant's starts too.
        let least = if fair.by_group(&p.lane) { 1 } else { 2 };
        if tenants.len() < least {
            return Ok(None);
        }
        let attempt = self
            .claim_fair_limited(p, limits, rates, fgen, &fair, &tenants)
            .await?;
        // As the plain fair claim: a stale list that found nothing due is
        // read again at once, so a tenant it misses is not left for the
        // poll.
        if stale && matches!(&attempt, Attempt::Items(items) if items.is_empty()) {
            self.fair_verdicts.forget(&p.lane);
            let (tenants, _) = self.fair_tenants(&p.lane).await?;
            if tenants.len() < least {
                return Ok(None);
            }
            return self
                .claim_fair_limited(p, limits, rates, fgen, &fair, &tenants)
                .await
                .map(Some);
        }
        Ok(Some(attempt))
    }

    /// The limited claim of `p` with its starts shared fairly between
    /// `tenants` (see the module docs), under `limits` and `rates`,
    /// checked against the generation `fgen`.
    pub(super) async fn claim_fair_limited(
        &self,
        p: &ClaimParams,
        limits: &[LimitSetting],
        rates: &[RateSetting],
        fgen: Option<i64>,
        fair: &FairSettings,
        tenants: &[Uuid],
    ) -> Result<Attempt> {
        let (mut tx, full) = match self.limited_open(p, limits, rates, fgen).await? {
            Opened::Ready(tx, full) => (tx, full),
            Opened::Done(attempt) => return Ok(attempt),
        };
        let mut passes = self.passes_locked(&mut tx, &p.lane).await?;
        let alive: Vec<(Uuid, u32)> = tenants.iter().map(|t| (*t, fair.weight(*t))).collect();
        let by_group = fair.by_group(&p.lane);
        let (candidates, lists, names) = self
            .fair_candidates(&mut tx, p, limits, &full, &passes, (alive, by_group))
            .await?;
        let keyed: Vec<Vec<(String, u32)>> = candidates
            .iter()
            .map(|c| keys_of(limits, &c.lane, &c.kind, c.tenant, c.group.as_deref()))
            .collect();
        let mut admission = self
            .lock_and_count(&mut tx, p, limits, keyed.iter())
            .await?;
        let (mut cells, rate_keys) = self.cells_for(&mut tx, &candidates, rates).await?;
        let lists = lists
            .into_iter()
            .map(|(t, l)| (t, fair.weight(t), l))
            .collect();
        let (chosen, inner) = passes.share_work(
            lists,
            p.limit as usize,
            |c: &Candidate| c.0,
            |c| {
                // Rates first: a start the rate holds back takes no slot.
                let (keys, rated) = (&keyed[c.1], &rate_keys[c.1]);
                if !cells.would_admit(rated) || !admission.admit(keys) {
                    return false;
                }
                cells.admit(rated);
                true
            },
        );
        cells.note_rate_limited();
        let ids: Vec<Uuid> = chosen.iter().map(|c| candidates[c.1].id).collect();
        let rows = if ids.is_empty() {
            Vec::new()
        } else {
            self.write_cells(&mut tx, cells.changed()).await?;
            self.claim_ids(&mut tx, &ids, p).await?
        };
        self.write_passes(&mut tx, &p.lane, &passes).await?;
        self.write_group_passes(&mut tx, &p.lane, &inner, &names)
            .await?;
        tx.commit().await?;
        let items = rows.iter().map(row::item).collect::<Result<Vec<Item>>>()?;
        Ok(Attempt::Items(items))
    }

    /// The candidates of each tenant the quotas of `passes` name among
    /// `alive` (its next due items in claim order, as the limited claim
    /// filters them; in a lane shared by group, by the inner rule over its
    /// groups), per tenant its work for the share, and the groups' keys
    /// by id. A tenant with none is dropped and the quotas drawn again
    /// ([`Rounds`]), so the claim stays work-conserving.
    async fn fair_candidates(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        limits: &[LimitSetting],
        full: &Full,
        passes: &Passes,
        (alive, by_group): (Vec<(Uuid, u32)>, bool),
    ) -> Result<(Vec<Parts>, Works<Candidate>, HashMap<Uuid, String>)> {
        let ordered = ordered_kinds(limits);
        let f = Filters {
            p,
            full,
            hold: ordered
                .iter()
                .filter(|(_, r)| *r == OnDeadLetter::Hold)
                .map(|(k, _)| k.as_str())
                .collect(),
            ordered: ordered.iter().map(|(k, _)| k.as_str()).collect(),
        };
        let mut candidates: Vec<Parts> = Vec::new();
        let mut lists: Works<Candidate> = BTreeMap::new();
        let mut names = HashMap::new();
        let mut rounds = Rounds::new(alive);
        loop {
            let fresh: Vec<(Uuid, u32)> = rounds.next(passes, p.limit);
            if fresh.is_empty() {
                break;
            }
            if by_group {
                let mut reader = Limited {
                    f: &f,
                    candidates: &mut candidates,
                };
                let per = (CANDIDATES_PER_SLOT, CANDIDATES_EXTRA);
                let (work, n) = self
                    .tenants_work(tx, &p.lane, &fresh, per, &mut reader)
                    .await?;
                names.extend(n);
                lists.extend(work);
            } else {
                let got = self
                    .tenants_candidates(tx, &f, &fresh, &mut candidates)
                    .await?;
                lists.extend(got.into_iter().map(|(t, l)| (t, TenantWork::Items(l))));
            }
            let empty: HashSet<Uuid> = fresh
                .iter()
                .map(|f| f.0)
                .filter(|t| lists.get(t).is_none_or(TenantWork::is_empty))
                .collect();
            if !rounds.settle(&empty) {
                break;
            }
        }
        Ok((candidates, lists, names))
    }

    /// The next due items of each of `fresh` (tenant, quota) in claim
    /// order, as the limited claim filters them: one descent of
    /// `items_fair` per tenant.
    async fn tenants_candidates(
        &self,
        tx: &mut sqlx::PgConnection,
        f: &Filters<'_>,
        fresh: &[(Uuid, u32)],
        candidates: &mut Vec<Parts>,
    ) -> Result<BTreeMap<Uuid, Vec<Candidate>>> {
        let ts: Vec<Uuid> = fresh.iter().map(|(t, _)| *t).collect();
        let caps: Vec<i64> = fresh
            .iter()
            .map(|(_, q)| {
                i64::from(
                    q.saturating_mul(CANDIDATES_PER_SLOT)
                        .saturating_add(CANDIDATES_EXTRA),
                )
            })
            .collect();
        // Planned on every call, as the limited claim's candidates
        // (limits.rs): a generic plan from stale statistics sorts the
        // lane's whole backlog.
        let rows = sqlx::query(CANDIDATES_FAIR_ORDERED.as_str())
            .persistent(false)
            .bind(&f.p.lane)
            .bind(&f.p.kinds)
            .bind(&ts)
            .bind(&f.full.kinds)
            .bind(&f.full.group_kinds)
            .bind(&f.full.group_tenants)
            .bind(&f.full.groups)
            .bind(&f.ordered)
            .bind(&f.hold)
            .bind(&caps)
            .fetch_all(&mut *tx)
            .await?;
        let mut lists: BTreeMap<Uuid, Vec<Candidate>> =
            ts.iter().map(|t| (*t, Vec::new())).collect();
        for r in &rows {
            let c = parts(r, true)?;
            let key = (r.try_get("priority")?, r.try_get("available_at")?, c.id);
            if let Some(l) = lists.get_mut(&c.tenant) {
                l.push((key, candidates.len()));
            }
            candidates.push(c);
        }
        for l in lists.values_mut() {
            l.sort_by_key(|c| c.0);
        }
        Ok(lists)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fairness::{NAMED_GROUP, NAMED_GROUP_ORDER};
    use super::*;

    /// The per-group candidates are the per-tenant statement over (tenant,
    /// cap, group) triples with the group filter spliced in.
    #[test]
    fn group_candidates_spliced() {
        let g = CANDIDATES_FAIR_NAMED.as_str();
        assert!(g.contains("AS q(tenant_id, cap, group_key)"));
        assert!(g.contains(&format!("AND {NAMED_GROUP}\n")));
        assert!(g.contains(NAMED_GROUP_ORDER));
        let f = super::super::fairness::named_candidates_sql();
        assert!(f.contains(NAMED_GROUP) && f.contains(NAMED_GROUP_ORDER));
        let u = CANDIDATES_FAIR_UNGROUPED.as_str();
        assert!(u.contains("AND i.tenant_id = q.tenant_id AND i.group_key IS NULL"));
        assert!(!u.contains("{group}") && !g.contains("/*{ordered}*/"));
    }
}
