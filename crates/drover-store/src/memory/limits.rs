//! The concurrency limits of the memory backend, under the store's one
//! lock: the settings, and the claim's admission (the lock makes the
//! count and the claim one step, so the limit is exact).

use std::collections::HashMap;

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::limits::{
    Admission, LimitScope, LimitSetting, LimitSource, LimitSpec, LimitStore, LimitUsage,
    OnDeadLetter, OrderBlocker, UsageRow, applies, blocks_order, effective, keys_of, ordered_kinds,
    usage,
};
use drover_core::error::Result;
use drover_core::item::{Item, Status};

/// The settings map's key: the scope and whether the operator set it.
fn slot(scope: &LimitScope, source: LimitSource) -> (LimitScope, bool) {
    (scope.clone(), source == LimitSource::Operator)
}

impl State {
    /// The limits in force.
    pub(super) fn limits_in_force(&self) -> Vec<LimitSetting> {
        let all: Vec<LimitSetting> = self.limits.values().cloned().collect();
        effective(&all)
    }

    /// The admission of a claim under `limits`, counting the slots held
    /// by claimed items now.
    pub(super) fn admission(&self, limits: &[LimitSetting]) -> Admission {
        let mut held: HashMap<String, u64> = Default::default();
        for i in self.items.values().filter(|i| i.status == Status::Claimed) {
            for (key, _) in item_keys(limits, i) {
                *held.entry(key).or_default() += 1;
            }
        }
        Admission::new(held)
    }
}

/// The head of each ordered group (tenant, kind, group): the earliest item
/// that keeps the rest waiting. A claim admits no other item of the group.
pub(super) struct Heads {
    ordered: HashMap<String, OnDeadLetter>,
    heads: HashMap<(Uuid, String, String), (u64, Uuid)>,
}

impl Heads {
    /// Whether `item` is an ordered group's item that is not its head.
    pub(super) fn holds_back(&self, item: &Item) -> bool {
        let Some(group) = &item.group else {
            return false;
        };
        if !self.ordered.contains_key(&item.kind) {
            return false;
        }
        self.heads
            .get(&(item.tenant_id, item.kind.clone(), group.clone()))
            .is_some_and(|(_, head)| *head != item.id)
    }
}

impl State {
    /// The heads of the ordered groups under `limits`.
    pub(super) fn group_heads(&self, limits: &[LimitSetting]) -> Heads {
        let ordered: HashMap<String, OnDeadLetter> = ordered_kinds(limits).into_iter().collect();
        let mut heads: HashMap<(Uuid, String, String), (u64, Uuid)> = HashMap::new();
        if !ordered.is_empty() {
            for i in self.items.values() {
                let (Some(g), Some(rule)) = (&i.group, ordered.get(&i.kind)) else {
                    continue;
                };
                if !blocks_order(i.status, *rule) {
                    continue;
                }
                let seq = self.seqs.get(&i.id).copied().unwrap_or(0);
                let e = heads
                    .entry((i.tenant_id, i.kind.clone(), g.clone()))
                    .or_insert((seq, i.id));
                if (seq, i.id) < *e {
                    *e = (seq, i.id);
                }
            }
        }
        Heads { ordered, heads }
    }
}

/// The scope keys `item` counts against under `limits`.
pub(super) fn item_keys(limits: &[LimitSetting], item: &Item) -> Vec<(String, u32)> {
    keys_of(
        limits,
        &item.lane,
        &item.kind,
        item.tenant_id,
        item.group.as_deref(),
    )
}

#[async_trait]
impl LimitStore for MemoryStore {
    async fn limit_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        spec: LimitSpec,
        actor: Uuid,
    ) -> Result<LimitSetting> {
        let row = LimitSetting {
            scope: scope.clone(),
            source,
            concurrency: spec.concurrency,
            ordered: spec.ordered,
            on_dead_letter: spec.on_dead_letter,
            set_at: self.now(),
            set_by: actor,
        };
        self.lock().limits.insert(slot(scope, source), row.clone());
        Ok(row)
    }

    async fn limit_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        Ok(self.lock().limits.remove(&slot(scope, source)).is_some())
    }

    async fn limit_settings(&self) -> Result<Vec<LimitSetting>> {
        Ok(self.lock().limits.values().cloned().collect())
    }

    async fn limit_usage(&self) -> Result<Vec<LimitUsage>> {
        let st = self.lock();
        let now = self.now();
        let rows: Vec<UsageRow> = st
            .items
            .values()
            .filter(|i| {
                i.status == Status::Claimed
                    || (i.status == Status::Pending && i.available_at <= now)
            })
            .map(|i| UsageRow {
                claimed: i.status == Status::Claimed,
                lane: i.lane.clone(),
                kind: i.kind.clone(),
                tenant: i.tenant_id,
                group: i.group.clone(),
                n: 1,
            })
            .collect();
        Ok(usage(&st.limits_in_force(), &rows))
    }

    async fn limits_apply(&self, lane: &str, kinds: &[String]) -> Result<bool> {
        Ok(applies(&self.lock().limits_in_force(), lane, kinds))
    }

    async fn order_blocker(
        &self,
        item: &Item,
        on_dead_letter: OnDeadLetter,
    ) -> Result<Option<OrderBlocker>> {
        let Some(group) = &item.group else {
            return Ok(None);
        };
        let st = self.lock();
        let mine = (st.seqs.get(&item.id).copied().unwrap_or(0), item.id);
        let first = st
            .items
            .values()
            .filter(|i| {
                i.tenant_id == item.tenant_id
                    && i.kind == item.kind
                    && i.group.as_ref() == Some(group)
                    && blocks_order(i.status, on_dead_letter)
            })
            .map(|i| ((st.seqs.get(&i.id).copied().unwrap_or(0), i.id), i.status))
            .filter(|(at, _)| *at < mine)
            .min_by_key(|(at, _)| *at);
        Ok(first.map(|((_, id), status)| OrderBlocker { id, status }))
    }
}

/// The memory store's claim scans its items in memory rather than walking
/// an index, so a deep backlog costs it no index walk: nothing to park.
#[async_trait]
impl crate::parking::ParkStore for MemoryStore {
    async fn park_pass(&self) -> Result<crate::parking::ParkPass> {
        Ok(crate::parking::ParkPass::default())
    }
    async fn parked_count(&self) -> Result<u64> {
        Ok(0)
    }
}
