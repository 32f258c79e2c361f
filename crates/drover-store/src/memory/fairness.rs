//! Fair share on the memory backend, under the store's one lock: the
//! settings, each lane's virtual time and each (lane, tenant)'s pass, and
//! in a lane shared by group each (lane, tenant, group)'s pass and each
//! (lane, tenant)'s group virtual time (the claim reads and moves them
//! under the same lock, so the share is exact).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::fairness::groups::{self, GROUP_VT};
use crate::fairness::{
    FAIR_WAITING_CAP, FairLane, FairSettings, FairShare, FairWeight, FairnessStore, Passes,
    TenantWork,
};
use drover_core::error::Result;
use drover_core::item::{Item, Status};

/// One lane's fair-share state.
#[derive(Debug, Default, Clone)]
pub(super) struct LaneFair {
    vt: i64,
    /// Each tenant's pass and the starts it was given.
    tenants: BTreeMap<Uuid, (i64, u64)>,
    /// In a lane shared by group: per tenant, each group's pass and
    /// starts by its storage key, the group virtual time under
    /// [`GROUP_VT`].
    groups: BTreeMap<Uuid, BTreeMap<String, (i64, u64)>>,
}

/// Every lane's fair-share state.
#[derive(Debug, Default)]
pub(super) struct Lanes(BTreeMap<String, LaneFair>);

impl Lanes {
    /// The passes of `lane` as a claim reads them.
    pub(super) fn read(&self, lane: &str) -> Passes {
        match self.0.get(lane) {
            Some(l) => Passes::new(l.vt, l.tenants.iter().map(|(t, (p, _))| (*t, *p))),
            None => Passes::new(0, []),
        }
    }

    /// The inner passes of `tenant` in `lane` as a claim reads them.
    pub(super) fn read_groups(&self, lane: &str, tenant: Uuid) -> Passes {
        let rows = self
            .0
            .get(lane)
            .and_then(|l| l.groups.get(&tenant))
            .into_iter()
            .flatten()
            .map(|(k, (p, _))| (k.clone(), *p));
        groups::inner_passes(rows)
    }

    /// Writes back the inner passes a claim's share moved (`names`: the
    /// groups' ids to their keys).
    pub(super) fn write_groups(
        &mut self,
        lane: &str,
        inner: &BTreeMap<Uuid, Passes>,
        names: &HashMap<Uuid, String>,
    ) {
        for (t, passes) in inner {
            let rows = groups::inner_rows(passes, names);
            if rows.is_empty() {
                continue;
            }
            let l = self.0.entry(lane.to_owned()).or_default();
            let g = l.groups.entry(*t).or_default();
            for (k, pass, n) in rows {
                let e = g.entry(k).or_insert((0, 0));
                *e = (pass, e.1 + n);
            }
        }
    }

    /// Writes back what a claim's share moved.
    pub(super) fn write(&mut self, lane: &str, passes: &Passes) {
        if passes.changed().is_empty() {
            return;
        }
        let l = self.0.entry(lane.to_owned()).or_default();
        l.vt = l.vt.max(passes.vt());
        for (t, (pass, n)) in passes.changed() {
            let e = l.tenants.entry(*t).or_insert((0, 0));
            *e = (*pass, e.1 + n);
        }
    }
}

/// Whether the candidates (priority, available_at, id) are of more than
/// one tenant: only then is there anything to share.
pub(super) fn many_tenants(st: &State, candidates: &[Candidate]) -> bool {
    let mut first = None;
    for c in candidates {
        let Some(t) = st.items.get(&c.2).map(|i| i.tenant_id) else {
            continue;
        };
        match first {
            None => first = Some(t),
            Some(f) if f != t => return true,
            Some(_) => {}
        }
    }
    false
}

/// The candidates split by tenant ([`by_tenant`]), each tenant's shared
/// between its groups ([`groups::by_group`]) on the passes of `lanes`;
/// and every group's key by its id.
pub(super) fn by_tenant_and_group(
    items: &HashMap<Uuid, Item>,
    lanes: &Lanes,
    lane: &str,
    lists: Vec<(Uuid, u32, Vec<Candidate>)>,
) -> (Works, HashMap<Uuid, String>) {
    let mut names = HashMap::new();
    let work = lists
        .into_iter()
        .map(|(t, w, l)| {
            let (work, n) = groups::by_group(lanes.read_groups(lane, t), l, |c| {
                let g = items.get(&c.2).and_then(|i| i.group.as_deref());
                groups::group_key(g).to_owned()
            });
            names.extend(n);
            (t, w, work)
        })
        .collect();
    (work, names)
}

/// Each tenant, its weight and its work for the share.
pub(super) type Works = Vec<(Uuid, u32, TenantWork<Candidate>)>;

/// A claim candidate: priority, available_at, id.
pub(super) type Candidate = (i16, DateTime<Utc>, Uuid);

/// The candidates (in claim order) split by tenant, each list keeping that
/// order, with each tenant's weight.
pub(super) fn by_tenant(
    items: &HashMap<Uuid, Item>,
    fair: &FairSettings,
    candidates: Vec<Candidate>,
) -> Vec<(Uuid, u32, Vec<Candidate>)> {
    let mut lists: BTreeMap<Uuid, Vec<Candidate>> = BTreeMap::new();
    for c in candidates {
        if let Some(i) = items.get(&c.2) {
            lists.entry(i.tenant_id).or_default().push(c);
        }
    }
    lists
        .into_iter()
        .map(|(t, l)| (t, fair.weight(t), l))
        .collect()
}

#[async_trait]
impl FairnessStore for MemoryStore {
    async fn fair_weight_set(&self, tenant: Uuid, weight: u32, actor: Uuid) -> Result<FairWeight> {
        let row = FairWeight {
            tenant,
            weight,
            set_at: self.now(),
            set_by: actor,
        };
        let mut st = self.lock();
        st.fair.weights.retain(|w| w.tenant != tenant);
        st.fair.weights.push(row.clone());
        st.fair.weights.sort_by_key(|w| w.tenant);
        Ok(row)
    }

    async fn fair_weight_clear(&self, tenant: Uuid) -> Result<bool> {
        let mut st = self.lock();
        let before = st.fair.weights.len();
        st.fair.weights.retain(|w| w.tenant != tenant);
        Ok(st.fair.weights.len() != before)
    }

    async fn fair_lane_set(
        &self,
        lane: &str,
        on: bool,
        by_group: bool,
        actor: Uuid,
    ) -> Result<FairLane> {
        let row = FairLane {
            lane: lane.to_owned(),
            on,
            by_group: on && by_group,
            set_at: self.now(),
            set_by: actor,
        };
        let mut st = self.lock();
        st.fair.lanes.retain(|l| l.lane != lane);
        st.fair.lanes.push(row.clone());
        st.fair.lanes.sort_by(|a, b| a.lane.cmp(&b.lane));
        Ok(row)
    }

    async fn fair_settings(&self) -> Result<FairSettings> {
        Ok(self.lock().fair.clone())
    }

    async fn fair_shares(&self) -> Result<Vec<FairShare>> {
        let now = self.now();
        let st = self.lock();
        let mut waiting: BTreeMap<(String, Uuid), u64> = BTreeMap::new();
        for i in st.items.values() {
            if i.status == Status::Pending && i.available_at <= now {
                *waiting.entry((i.lane.clone(), i.tenant_id)).or_default() += 1;
            }
        }
        for (lane, l) in &st.passes.0 {
            for t in l.tenants.keys() {
                waiting.entry((lane.clone(), *t)).or_default();
            }
        }
        Ok(waiting
            .into_iter()
            .map(|((lane, tenant), waiting)| {
                let l = st.passes.0.get(&lane).cloned().unwrap_or_default();
                let (pass, started) = l.tenants.get(&tenant).copied().unwrap_or((l.vt, 0));
                FairShare {
                    weight: st.fair.weight(tenant),
                    lane,
                    tenant,
                    waiting: waiting.min(FAIR_WAITING_CAP),
                    started,
                    pass: pass.max(l.vt),
                    lane_vt: l.vt,
                }
            })
            .collect())
    }

    async fn fair_group_passes(&self, lane: &str, tenant: Uuid) -> Result<Vec<(String, i64, u64)>> {
        let st = self.lock();
        Ok(st
            .passes
            .0
            .get(lane)
            .and_then(|l| l.groups.get(&tenant))
            .into_iter()
            .flatten()
            .map(|(k, (p, n))| (k.clone(), *p, *n))
            .collect())
    }

    async fn fair_passes_purge(&self, batch: u32) -> Result<u64> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let pending: std::collections::HashSet<(&str, Uuid)> = st
            .items
            .values()
            .filter(|i| i.status == Status::Pending)
            .map(|i| (i.lane.as_str(), i.tenant_id))
            .collect();
        let grouped: std::collections::HashSet<(&str, Uuid, &str)> = st
            .items
            .values()
            .filter(|i| i.status == Status::Pending)
            .map(|i| {
                (
                    i.lane.as_str(),
                    i.tenant_id,
                    groups::group_key(i.group.as_deref()),
                )
            })
            .collect();
        let mut n = 0u64;
        for (lane, l) in st.passes.0.iter_mut() {
            for (t, g) in l.groups.iter_mut() {
                let vt = g.get(GROUP_VT).map_or(0, |r| r.0);
                let busy = pending.contains(&(lane.as_str(), *t));
                // Idle: at or behind the tenant's group virtual time, or
                // with nothing pending; the virtual time's own row once
                // the tenant has nothing pending in the lane.
                let idle: Vec<String> = g
                    .iter()
                    .filter(|(k, (p, _))| {
                        if k.as_str() == GROUP_VT {
                            !busy
                        } else {
                            *p <= vt || !grouped.contains(&(lane.as_str(), *t, k.as_str()))
                        }
                    })
                    .map(|(k, _)| k.clone())
                    .take((u64::from(batch) - n) as usize)
                    .collect();
                for k in idle {
                    g.remove(&k);
                    n += 1;
                }
            }
            l.groups.retain(|_, g| !g.is_empty());
        }
        for (lane, l) in st.passes.0.iter_mut() {
            let vt = l.vt;
            // Idle: at or behind the lane's virtual time, or with nothing
            // pending in the lane (it comes back lifted to the virtual
            // time, at most one start ahead of its row's place).
            let idle: Vec<Uuid> = l
                .tenants
                .iter()
                .filter(|(t, (p, _))| *p <= vt || !pending.contains(&(lane.as_str(), **t)))
                .map(|(t, _)| *t)
                .take((u64::from(batch) - n) as usize)
                .collect();
            for t in idle {
                l.tenants.remove(&t);
                n += 1;
            }
        }
        Ok(n)
    }
}
