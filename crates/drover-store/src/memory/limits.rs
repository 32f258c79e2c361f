//! The concurrency limits of the memory backend, under the store's one
//! lock: the settings, and the claim's admission (the lock makes the
//! count and the claim one step, so the limit is exact).

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::limits::{
    Admission, LimitScope, LimitSetting, LimitSource, LimitStore, LimitUsage, UsageRow, effective,
    keys_of, usage,
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
        let mut held: std::collections::HashMap<String, u64> = Default::default();
        for i in self.items.values().filter(|i| i.status == Status::Claimed) {
            for (key, _) in item_keys(limits, i) {
                *held.entry(key).or_default() += 1;
            }
        }
        Admission::new(held)
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
        concurrency: u32,
        actor: Uuid,
    ) -> Result<LimitSetting> {
        let row = LimitSetting {
            scope: scope.clone(),
            source,
            concurrency,
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
}
