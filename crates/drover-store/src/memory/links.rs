//! [`LinkStore`] in memory: the same rules as PostgreSQL's and SQLite's
//! migration 0039 triggers, run under the store's one lock
//! ([`State::finished`] after every transition to a final status).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::AuditEntry;
use crate::links::{
    self, AfterPolicy, BatchCounts, BatchRow, EdgeState, ItemLinks, LinkCensus, LinkStore,
    NewBatch, as_inserted, is_waiting_at,
};
use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Status};

/// One edge: its policy and whether it is resolved.
#[derive(Debug, Clone, Copy)]
struct Edge {
    policy: AfterPolicy,
    resolved: bool,
}

/// The links' tables.
#[derive(Default)]
pub(super) struct Links {
    linked: HashSet<Uuid>,
    edges: HashMap<(Uuid, Uuid), Edge>,
    by_dep: HashMap<Uuid, Vec<Uuid>>,
    by_item: HashMap<Uuid, Vec<Uuid>>,
    waits: HashMap<Uuid, (i32, Option<DateTime<Utc>>)>,
    batches: HashMap<(Uuid, Uuid), (BatchRow, Uuid)>,
    members: HashMap<Uuid, (Uuid, bool)>,
    /// Lanes to wake once the call that released work returns.
    pub(super) wakes: Vec<String>,
}

impl State {
    /// A linked item became final (`id`'s status is its new one): release
    /// or dead-letter its dependants, count it in its batch; a dependant
    /// dead-lettered here is finished in turn.
    pub(super) fn finished(&mut self, id: Uuid, now: DateTime<Utc>) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            let Some(status) = self.items.get(&id).map(|i| i.status) else {
                continue;
            };
            if !status.is_final() || !self.links.linked.contains(&id) {
                continue;
            }
            let dependants = self.links.by_dep.get(&id).cloned().unwrap_or_default();
            for d in dependants {
                let Some(edge) = self.links.edges.get_mut(&(id, d)) else {
                    continue;
                };
                if edge.resolved {
                    continue;
                }
                match links::edge_state(status, edge.policy) {
                    EdgeState::Open => {}
                    EdgeState::Resolved => {
                        edge.resolved = true;
                        let left = self.links.waits.get_mut(&d).map(|w| {
                            w.0 -= 1;
                            (w.0, w.1)
                        });
                        if let Some((0, run_at)) = left {
                            self.release(d, run_at, now);
                        }
                    }
                    EdgeState::FailsDependant => {
                        edge.resolved = true;
                        if self.fail_waiting(d, &links::dependency_error(id, status), now) {
                            work.push(d);
                        }
                    }
                }
            }
            self.count_member(id, status, now);
        }
    }

    /// A purged item's own link rows go with it: the edges whose
    /// dependant it is, its open count, its batch membership. The edges
    /// whose dependency it is stay while their dependant is stored (a
    /// `wait` dependant still names a purged dead letter).
    pub(super) fn links_purged(&mut self, id: Uuid) {
        for d in self.links.by_item.remove(&id).unwrap_or_default() {
            self.links.edges.remove(&(d, id));
            if let Some(v) = self.links.by_dep.get_mut(&d) {
                v.retain(|x| *x != id);
                if v.is_empty() {
                    self.links.by_dep.remove(&d);
                }
            }
        }
        self.links.waits.remove(&id);
        self.links.members.remove(&id);
        self.links.linked.remove(&id);
    }

    /// Deletes the batches whose story is over: callback decision taken,
    /// created before `before`, no member stored, no callback still to run
    /// (as `batches_purge.sql`). Returns how many.
    pub(super) fn batches_purge(&mut self, before: DateTime<Utc>) -> usize {
        let with_members: HashSet<Uuid> = self.links.members.values().map(|m| m.0).collect();
        let items = &self.items;
        let n = self.links.batches.len();
        self.links.batches.retain(|_, (row, _)| {
            let callback_open = items
                .get(&row.callback_id)
                .is_some_and(|i| matches!(i.status, Status::Pending | Status::Claimed));
            let over = row.fired
                && row.created_at < before
                && !with_members.contains(&row.id)
                && !callback_open;
            !over
        });
        n - self.links.batches.len()
    }

    /// Makes a waiting dependant available (at `run_at` if later).
    fn release(&mut self, id: Uuid, run_at: Option<DateTime<Utc>>, now: DateTime<Utc>) {
        if let Some(item) = self.items.get_mut(&id)
            && item.status == Status::Pending
            && is_waiting_at(item.available_at)
        {
            item.available_at = run_at.map_or(now, |r| r.max(now));
            item.updated_at = now;
            self.links.wakes.push(item.lane.clone());
        }
    }

    /// Dead-letters a waiting dependant; true when it was waiting.
    fn fail_waiting(&mut self, id: Uuid, error: &str, now: DateTime<Utc>) -> bool {
        let Some(item) = self.items.get_mut(&id) else {
            return false;
        };
        if item.status != Status::Pending || !is_waiting_at(item.available_at) {
            return false;
        }
        item.status = Status::Failed;
        item.last_error = Some(error.to_owned());
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        let entry = AuditEntry {
            tenant_id: item.tenant_id,
            item_id: id,
            action: "dead_letter".into(),
            actor: Uuid::nil(),
            detail: item.last_error.clone(),
            at: now,
        };
        self.audit.push(entry);
        true
    }

    fn count_member(&mut self, id: Uuid, status: Status, now: DateTime<Utc>) {
        let Some((batch, counted)) = self.links.members.get_mut(&id) else {
            return;
        };
        if *counted {
            return;
        }
        *counted = true;
        let batch = *batch;
        let Some(tenant) = self.items.get(&id).map(|i| i.tenant_id) else {
            return;
        };
        if let Some((row, _)) = self.links.batches.get_mut(&(tenant, batch)) {
            match status {
                Status::Done => row.counts.done += 1,
                Status::Failed => row.counts.failed += 1,
                _ => row.counts.cancelled += 1,
            }
        }
        self.batch_fire(tenant, batch, now);
    }

    /// Takes a sealed, complete batch's callback decision, once.
    fn batch_fire(&mut self, tenant: Uuid, batch: Uuid, now: DateTime<Utc>) {
        let Some((row, created_by)) = self.links.batches.get_mut(&(tenant, batch)) else {
            return;
        };
        if !row.sealed || row.fired || row.open() != 0 {
            return;
        }
        row.fired = true;
        if !row.when.fires(&row.counts) {
            return;
        }
        let cb = NewItem::new(row.callback_kind.clone(), links::callback_payload(row))
            .with_id(row.callback_id)
            .with_tenant(tenant)
            .with_lane(row.callback_lane.clone())
            .with_actor(*created_by);
        let (r, _) = self.insert(&cb, now);
        if r == InsertResult::Inserted {
            self.links.wakes.push(cb.lane);
        }
    }

    /// Refuses a linked enqueue that could not be written whole.
    fn check_links(&self, items: &[NewItem], plan: &links::LinkPlan) -> Result<()> {
        let ids: HashSet<Uuid> = items.iter().map(|i| i.id).collect();
        for it in items {
            if let Some(holder) = self.items.get(&it.id)
                && holder.tenant_id != it.tenant_id
            {
                return Err(super::id_taken(it.id));
            }
        }
        for d in &plan.deps {
            let known = ids.contains(d)
                || self
                    .items
                    .get(d)
                    .is_some_and(|i| i.tenant_id == plan.tenant);
            if !known {
                return Err(Error::invalid(
                    "after",
                    format!("{d} is not an item of this tenant"),
                ));
            }
        }
        for b in &plan.batches {
            match self.links.batches.get(&(plan.tenant, *b)) {
                Some((row, _)) if !row.sealed => {}
                _ => {
                    return Err(Error::invalid(
                        "batch",
                        format!("{b} is not an open batch of this tenant"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn links_write(&mut self, items: &[NewItem], now: DateTime<Utc>) -> Result<Vec<Inserted>> {
        let plan = links::plan(items)?;
        self.check_links(items, &plan)?;
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let (result, item) = self.insert(&as_inserted(it), now);
            let item = item.ok_or_else(|| super::id_taken(it.id))?;
            out.push(Inserted { result, item });
        }
        let inserted: Vec<bool> = out
            .iter()
            .map(|o| o.result == InsertResult::Inserted)
            .collect();
        let mut status = HashMap::new();
        for id in links::to_mark(items, &inserted, &plan) {
            if let Some(i) = self.items.get(&id).filter(|i| i.tenant_id == plan.tenant) {
                status.insert(id, i.status);
                self.links.linked.insert(id);
            }
        }
        let w = links::write_plan(items, &inserted, &plan, &status)?;
        for (batch, members) in &w.members {
            if let Some((row, _)) = self.links.batches.get_mut(&(plan.tenant, *batch)) {
                row.total += members.len() as i64;
            }
            for m in members {
                self.links.members.insert(*m, (*batch, false));
            }
        }
        for (dep, item, policy, resolved) in &w.edges {
            self.links.edges.insert(
                (*dep, *item),
                Edge {
                    policy: *policy,
                    resolved: *resolved,
                },
            );
            self.links.by_dep.entry(*dep).or_default().push(*item);
            self.links.by_item.entry(*item).or_default().push(*dep);
        }
        for (item, left, run_at) in &w.waits {
            self.links.waits.insert(*item, (*left, *run_at));
        }
        for id in &w.release {
            let run_at = self.links.waits.get(id).and_then(|w| w.1);
            self.release(*id, run_at, now);
        }
        for (id, err) in &w.fail {
            if self.fail_waiting(*id, err, now) {
                self.finished(*id, now);
            }
        }
        for o in &mut out {
            if let Some(i) = self.items.get(&o.item.id)
                && o.result == InsertResult::Inserted
            {
                o.item = i.clone();
            }
        }
        Ok(out)
    }
}

impl MemoryStore {
    /// Wakes the lanes the last call released work on.
    pub(super) fn flush_wakes(&self, st: &mut State) {
        for lane in std::mem::take(&mut st.links.wakes) {
            self.wake.counted(&lane);
        }
    }
}

#[async_trait]
impl LinkStore for MemoryStore {
    async fn links_insert(&self, items: &[NewItem]) -> Result<Vec<Inserted>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let mut st = self.lock();
        let out = st.links_write(items, now)?;
        for o in &out {
            if o.result == InsertResult::Inserted && !is_waiting_at(o.item.available_at) {
                st.links.wakes.push(o.item.lane.clone());
            }
        }
        self.flush_wakes(&mut st);
        Ok(out)
    }

    async fn links_of(&self, tenant: Uuid, id: Uuid) -> Result<ItemLinks> {
        let st = self.lock();
        if st.items.get(&id).is_none_or(|i| i.tenant_id != tenant) {
            return Ok(ItemLinks::default());
        }
        let mut after = st.links.by_item.get(&id).cloned().unwrap_or_default();
        after.sort_unstable();
        let mut dependants = st.links.by_dep.get(&id).cloned().unwrap_or_default();
        dependants.sort_unstable();
        let after_policy = after
            .first()
            .and_then(|d| st.links.edges.get(&(*d, id)))
            .map(|e| e.policy);
        Ok(ItemLinks {
            after,
            after_policy,
            waiting_on: st.links.waits.get(&id).map_or(0, |w| i64::from(w.0)),
            dependants,
            batch: st.links.members.get(&id).map(|m| m.0),
        })
    }

    async fn links_dependencies(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Item>> {
        let st = self.lock();
        if st.items.get(&id).is_none_or(|i| i.tenant_id != tenant) {
            return Ok(Vec::new());
        }
        let mut deps: Vec<Item> = st
            .links
            .by_item
            .get(&id)
            .into_iter()
            .flatten()
            .filter_map(|d| st.items.get(d))
            .filter(|i| i.tenant_id == tenant)
            .cloned()
            .collect();
        deps.sort_unstable_by_key(|i| i.id);
        Ok(deps)
    }

    async fn batch_create(&self, b: &NewBatch) -> Result<BatchRow> {
        let now = self.now();
        let mut st = self.lock();
        if let Some((row, _)) = st.links.batches.get(&(b.tenant_id, b.id)) {
            return links::same_batch(b, row.clone());
        }
        let row = BatchRow {
            id: b.id,
            tenant_id: b.tenant_id,
            callback_kind: b.callback_kind.clone(),
            callback_lane: b.callback_lane.clone(),
            callback_payload: b.callback_payload.clone(),
            when: b.when,
            callback_id: b.callback_id,
            sealed: false,
            fired: false,
            total: 0,
            counts: BatchCounts::default(),
            created_at: now,
        };
        st.links
            .batches
            .insert((b.tenant_id, b.id), (row.clone(), b.created_by));
        Ok(row)
    }

    async fn batch_seal(&self, tenant: Uuid, id: Uuid) -> Result<BatchRow> {
        let now = self.now();
        let mut st = self.lock();
        match st.links.batches.get_mut(&(tenant, id)) {
            Some((row, _)) => row.sealed = true,
            None => return Err(Error::NotFound(format!("batch {id}"))),
        }
        st.batch_fire(tenant, id, now);
        self.flush_wakes(&mut st);
        Ok(st
            .links
            .batches
            .get(&(tenant, id))
            .map(|(r, _)| r.clone())
            .ok_or_else(|| Error::NotFound(format!("batch {id}")))?)
    }

    async fn batch_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<BatchRow>> {
        Ok(self
            .lock()
            .links
            .batches
            .get(&(tenant, id))
            .map(|(r, _)| r.clone()))
    }

    async fn batch_list(&self, tenant: Uuid, limit: u32) -> Result<Vec<BatchRow>> {
        let st = self.lock();
        let mut rows: Vec<BatchRow> = st
            .links
            .batches
            .values()
            .filter(|(r, _)| r.tenant_id == tenant)
            .map(|(r, _)| r.clone())
            .collect();
        rows.sort_by_key(|b| std::cmp::Reverse((b.created_at, b.id)));
        rows.truncate(limit as usize);
        Ok(rows)
    }

    async fn batch_members(&self, tenant: Uuid, id: Uuid) -> Result<Vec<(Status, i64)>> {
        let st = self.lock();
        let mut per: std::collections::BTreeMap<Status, i64> = Default::default();
        for (item, (batch, _)) in &st.links.members {
            if *batch != id {
                continue;
            }
            if let Some(i) = st.items.get(item).filter(|i| i.tenant_id == tenant) {
                *per.entry(i.status).or_default() += 1;
            }
        }
        Ok(per.into_iter().collect())
    }

    async fn links_census(&self) -> Result<LinkCensus> {
        let st = self.lock();
        let n = |x: usize| i64::try_from(x).unwrap_or(i64::MAX);
        Ok(LinkCensus {
            edges: n(st.links.edges.len()),
            waits: n(st.links.waits.len()),
            members: n(st.links.members.len()),
            batches: n(st.links.batches.len()),
        })
    }
}
