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

use std::collections::{BTreeMap, HashSet};

use sqlx::Row;
use uuid::Uuid;

use super::claim_gen::Attempt;
use super::limits::{CANDIDATES_EXTRA, CANDIDATES_PER_SLOT, Full, Opened, Parts, parts};
use super::{PgStore, row};
use crate::ClaimParams;
use crate::fairness::{FairSettings, Passes, Rounds};
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

/// One candidate of the share: its claim order key and its index among
/// the read candidates.
type Candidate = ((i16, chrono::DateTime<chrono::Utc>, Uuid), usize);

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
        if tenants.len() < 2 {
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
            if tenants.len() < 2 {
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
        let (candidates, lists) = self
            .fair_candidates(&mut tx, p, limits, &full, &passes, alive)
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
        let chosen = passes.share(
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
        tx.commit().await?;
        let items = rows.iter().map(row::item).collect::<Result<Vec<Item>>>()?;
        Ok(Attempt::Items(items))
    }

    /// The candidates of each tenant the quotas of `passes` name among
    /// `alive` (its next due items in claim order, as the limited claim
    /// filters them), and per tenant its list for the share. A tenant with
    /// none is dropped and the quotas drawn again ([`Rounds`]), so the
    /// claim stays work-conserving.
    async fn fair_candidates(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        limits: &[LimitSetting],
        full: &Full,
        passes: &Passes,
        alive: Vec<(Uuid, u32)>,
    ) -> Result<(Vec<Parts>, BTreeMap<Uuid, Vec<Candidate>>)> {
        let ordered = ordered_kinds(limits);
        let hold: Vec<&str> = ordered
            .iter()
            .filter(|(_, r)| *r == OnDeadLetter::Hold)
            .map(|(k, _)| k.as_str())
            .collect();
        let ordered: Vec<&str> = ordered.iter().map(|(k, _)| k.as_str()).collect();
        let mut candidates: Vec<Parts> = Vec::new();
        let mut lists: BTreeMap<Uuid, Vec<Candidate>> = BTreeMap::new();
        let mut rounds = Rounds::new(alive);
        loop {
            let fresh: Vec<(Uuid, i64)> = rounds
                .next(passes, p.limit)
                .into_iter()
                .map(|(t, q)| {
                    let cap = q
                        .saturating_mul(CANDIDATES_PER_SLOT)
                        .saturating_add(CANDIDATES_EXTRA);
                    (t, i64::from(cap))
                })
                .collect();
            if fresh.is_empty() {
                break;
            }
            let (ts, caps): (Vec<Uuid>, Vec<i64>) = fresh.iter().copied().unzip();
            // Planned on every call, as the limited claim's candidates
            // (limits.rs): a generic plan from stale statistics sorts the
            // lane's whole backlog.
            let rows = sqlx::query(CANDIDATES_FAIR_ORDERED.as_str())
                .persistent(false)
                .bind(&p.lane)
                .bind(&p.kinds)
                .bind(&ts)
                .bind(&full.kinds)
                .bind(&full.group_kinds)
                .bind(&full.group_tenants)
                .bind(&full.groups)
                .bind(&ordered)
                .bind(&hold)
                .bind(&caps)
                .fetch_all(&mut *tx)
                .await?;
            for t in &ts {
                lists.insert(*t, Vec::new());
            }
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
            let empty: HashSet<Uuid> = ts
                .iter()
                .filter(|t| lists.get(*t).is_none_or(Vec::is_empty))
                .copied()
                .collect();
            if !rounds.settle(&empty) {
                break;
            }
        }
        Ok((candidates, lists))
    }
}
