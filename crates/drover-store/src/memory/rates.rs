//! The rate limits of the memory backend, under the store's one lock: the
//! settings and the cells (the claim reads and moves the cells under the
//! same lock, so the rate is exact).

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::limits::{LimitScope, LimitSource};
use crate::rates::{Rate, RateSetting, RateStore, RateUsage, effective, usage, wait_for};
use drover_core::error::Result;

impl State {
    /// The rates in force.
    pub(super) fn rates_in_force(&self) -> Vec<RateSetting> {
        let all: Vec<RateSetting> = self.rates.values().cloned().collect();
        effective(&all)
    }
}

#[async_trait]
impl RateStore for MemoryStore {
    async fn rate_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        rate: Rate,
        actor: Uuid,
    ) -> Result<RateSetting> {
        let row = RateSetting {
            scope: scope.clone(),
            source,
            rate,
            set_at: self.now(),
            set_by: actor,
        };
        self.lock().rates.insert(
            (scope.clone(), source == LimitSource::Operator),
            row.clone(),
        );
        Ok(row)
    }

    async fn rate_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        Ok(self
            .lock()
            .rates
            .remove(&(scope.clone(), source == LimitSource::Operator))
            .is_some())
    }

    async fn rate_settings(&self) -> Result<Vec<RateSetting>> {
        Ok(self.lock().rates.values().cloned().collect())
    }

    async fn rate_usage(&self) -> Result<Vec<RateUsage>> {
        let st = self.lock();
        let now = self.now();
        Ok(usage(
            &st.rates_in_force(),
            st.cells.iter().map(|(k, t)| (k.as_str(), *t)),
            now,
        ))
    }

    async fn rate_cells_purge(&self, batch: u32) -> Result<u64> {
        let now = self.now();
        let mut st = self.lock();
        let idle: Vec<String> = st
            .cells
            .iter()
            .filter(|(_, t)| **t < now)
            .map(|(k, _)| k.clone())
            .take(batch as usize)
            .collect();
        for k in &idle {
            st.cells.remove(k);
        }
        Ok(idle.len() as u64)
    }

    async fn rate_wait(&self, lane: &str, kinds: &[String]) -> Result<Option<std::time::Duration>> {
        let st = self.lock();
        Ok(wait_for(
            &st.rates_in_force(),
            lane,
            kinds,
            st.cells.iter().map(|(k, t)| (k.as_str(), *t)),
            self.now(),
        ))
    }
}
