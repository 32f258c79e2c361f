//! The rate limits of the memory backend, under the store's one lock: the
//! settings and the cells (the claim reads and moves the cells under the
//! same lock, so the rate is exact).

use async_trait::async_trait;
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::closures::{Closure, ClosureStore, closure_key, parse_closure_key, with_closures};
use crate::limits::{LimitScope, LimitSource};
use crate::rates::{Rate, RateSetting, RateStore, RateUsage, effective, usage, wait_for};
use drover_core::error::Result;

impl State {
    /// The rates in force.
    pub(super) fn rates_in_force(&self) -> Vec<RateSetting> {
        let all: Vec<RateSetting> = self.rates.values().cloned().collect();
        if self.closed_by.is_empty() {
            return effective(&all);
        }
        with_closures(effective(&all), self.closed_by.keys().map(String::as_str))
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
        let behind =
            self.now() - chrono::Duration::from_std(crate::rates::CELL_GRACE).unwrap_or_default();
        let mut st = self.lock();
        let idle: Vec<String> = st
            .cells
            .iter()
            .filter(|(_, t)| **t < behind)
            .map(|(k, _)| k.clone())
            .take(batch as usize)
            .collect();
        for k in &idle {
            st.cells.remove(k);
            st.closed_by.remove(k);
        }
        Ok(idle.len() as u64)
    }

    async fn rate_cells(
        &self,
        keys: &[String],
    ) -> Result<(
        chrono::DateTime<chrono::Utc>,
        Vec<(String, chrono::DateTime<chrono::Utc>)>,
    )> {
        let now = self.now();
        let st = self.lock();
        let cells = keys
            .iter()
            .filter_map(|k| {
                st.cells
                    .get(k)
                    .filter(|t| **t > now)
                    .map(|t| (k.clone(), *t))
            })
            .collect();
        Ok((now, cells))
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

#[async_trait]
impl ClosureStore for MemoryStore {
    async fn close_until(
        &self,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
        until: chrono::DateTime<chrono::Utc>,
        by_item: Option<Uuid>,
        actor: Uuid,
    ) -> Result<Closure> {
        let key = closure_key(kind, tenant, group);
        let now = self.now();
        let mut st = self.lock();
        let live = st
            .cells
            .get(&key)
            .copied()
            .filter(|t| *t > now && st.closed_by.contains_key(&key));
        // A handler's close only moves a closure in force later.
        if !(by_item.is_some() && live.is_some_and(|t| t >= until)) {
            st.cells.insert(key.clone(), until);
            st.closed_by.insert(key.clone(), (actor, by_item));
        }
        Ok(st.closure(&key).unwrap_or(Closure {
            kind: kind.to_owned(),
            tenant_id: tenant,
            group: group.map(str::to_owned),
            until,
            closed_by: actor,
            closed_by_item: by_item,
        }))
    }

    async fn reopen(&self, kind: &str, tenant: Uuid, group: Option<&str>) -> Result<bool> {
        let key = closure_key(kind, tenant, group);
        let now = self.now();
        let mut st = self.lock();
        let was = st.closed_by.remove(&key).is_some();
        let live = st.cells.remove(&key).is_some_and(|t| t > now);
        Ok(was && live)
    }

    async fn closures(&self) -> Result<Vec<Closure>> {
        let now = self.now();
        let st = self.lock();
        let mut out: Vec<Closure> = st
            .closed_by
            .keys()
            .filter_map(|k| st.closure(k))
            .filter(|c| c.until > now)
            .collect();
        out.sort_by_key(Closure::key);
        Ok(out)
    }
}

impl State {
    /// The closure of the cell `key`, if it is one.
    fn closure(&self, key: &str) -> Option<Closure> {
        let (kind, tenant_id, group) = parse_closure_key(key)?;
        let (closed_by, closed_by_item) = *self.closed_by.get(key)?;
        Some(Closure {
            kind,
            tenant_id,
            group,
            until: *self.cells.get(key)?,
            closed_by,
            closed_by_item,
        })
    }
}
