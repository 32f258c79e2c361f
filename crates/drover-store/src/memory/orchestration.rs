//! Orchestration records and signals in memory, under the store's one lock:
//! the step item's fenced completion and the record's compare-and-set are
//! one critical section, exactly as one SQL transaction.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{MemoryStore, State, clear_claim};
use crate::ClaimRef;
use crate::orchestration::transition::{
    cancel_due, cancel_requested, parks_for_signal, wake_on_signal,
};
use crate::orchestration::{
    DeadStep, NewOrchestration, Orchestration, OrchestrationFilter, OrchestrationInserted,
    OrchestrationStatus, OrchestrationStore, Signal, SignalOutcome, Transition,
};
use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, NewItem, Status};

/// The records and signals.
#[derive(Default)]
pub(super) struct Records {
    records: HashMap<Uuid, Orchestration>,
    keys: HashMap<(Uuid, String), Uuid>,
    signals: Vec<Signal>,
}

impl State {
    fn record(&self, tenant: Uuid, id: Uuid) -> Option<&Orchestration> {
        self.orchestrations
            .records
            .get(&id)
            .filter(|r| r.tenant_id == tenant)
    }

    /// The record `t` would leave, or why it is refused (a stale version,
    /// no such record); writes nothing.
    fn written(
        r: Option<&Orchestration>,
        t: &Transition,
        now: DateTime<Utc>,
    ) -> Result<Orchestration> {
        let Some(r) = r else {
            return Err(Error::NotFound(format!("orchestration {}", t.id)));
        };
        if r.version != t.expected_version {
            return Err(Error::Conflict(format!(
                "orchestration {}: version {} expected, {} stored",
                t.id, t.expected_version, r.version
            )));
        }
        let mut r = r.clone();
        let w = &t.write;
        r.status = w.status;
        r.step = w.step.clone();
        r.state = w.state.clone();
        r.parked_until = w.parked_until;
        r.waiting_for = w.waiting_for.clone();
        r.timeout_step = w.timeout_step.clone();
        r.completed = w.completed.clone();
        r.history = w.history.clone();
        r.history_dropped = w.history_dropped;
        r.result = w.result.clone();
        r.error = w.error.clone();
        // A cancel request is never written away by a writer that read the
        // record before it.
        r.cancel_requested = r.cancel_requested || w.cancel_requested;
        r.resume_as = w.resume_as;
        r.version += 1;
        r.updated_at = now;
        Ok(r)
    }

    /// `Conflict` when `item` would not be inserted: its id or its key is
    /// held by another item. A step item that cannot be inserted fails its
    /// transition rather than leave the record without one.
    fn insertable(&self, item: &NewItem) -> Result<()> {
        let key_held = item
            .idempotency_key
            .as_ref()
            .is_some_and(|k| self.keys.contains_key(&(item.tenant_id, k.clone())));
        if self.items.contains_key(&item.id) || key_held {
            return Err(Error::Conflict(format!(
                "the step item {} could not be inserted: its id or key {:?} is taken",
                item.id, item.idempotency_key
            )));
        }
        Ok(())
    }

    /// Writes a record `written` computed, consuming the signal and
    /// inserting the item (unless `skip_item`), all checked beforehand.
    fn commit(&mut self, r: Orchestration, t: &Transition, skip_item: bool, now: DateTime<Utc>) {
        if let Some(sid) = t.consume_signal
            && let Some(s) = self
                .orchestrations
                .signals
                .iter_mut()
                .find(|s| s.id == sid && s.consumed_at.is_none())
        {
            s.consumed_at = Some(now);
        }
        if let Some(item) = t.enqueue.as_ref().filter(|_| !skip_item) {
            self.insert(item, now);
        }
        self.orchestrations.records.insert(r.id, r);
    }

    /// The compare-and-set with what rides along, and what follows it in the
    /// same critical section: a cancel request found on a record left
    /// running or parked starts compensation (the transition's own item is
    /// not inserted); else a park for a signal already waiting becomes its
    /// wake-up. Every check runs before the first write: all or nothing.
    fn apply_and_match(&mut self, t: &Transition, now: DateTime<Utc>) -> Result<Orchestration> {
        let first = Self::written(self.record(t.tenant_id, t.id), t, now)?;
        let cancel = cancel_due(&first);
        let follow = if cancel {
            Some(cancel_requested(&first, now))
        } else {
            parks_for_signal(t)
                .and_then(|name| self.pending_signal(&first, name))
                .map(|sig| wake_on_signal(&first, &sig, now))
        };
        if let Some(item) = t.enqueue.as_ref().filter(|_| !cancel) {
            self.insertable(item)?;
        }
        let second = match &follow {
            Some(f) => {
                if let Some(item) = &f.enqueue {
                    self.insertable(item)?;
                }
                Some(Self::written(Some(&first), f, now)?)
            }
            None => None,
        };
        self.commit(first.clone(), t, cancel, now);
        match (follow, second) {
            (Some(f), Some(second)) => {
                self.commit(second.clone(), &f, false, now);
                Ok(second)
            }
            _ => Ok(first),
        }
    }

    fn pending_signal(&self, r: &Orchestration, name: &str) -> Option<Signal> {
        self.orchestrations
            .signals
            .iter()
            .find(|s| {
                s.tenant_id == r.tenant_id
                    && s.orchestration_id == r.id
                    && s.name == name
                    && s.consumed_at.is_none()
            })
            .cloned()
    }
}

fn stamp(new: &NewOrchestration, now: DateTime<Utc>) -> Orchestration {
    Orchestration {
        id: new.id,
        tenant_id: new.tenant_id,
        kind: new.kind.clone(),
        lane: new.lane.clone(),
        max_attempts: new.max_attempts,
        status: OrchestrationStatus::Running,
        step: new.step.clone(),
        state: new.state.clone(),
        version: 1,
        parked_until: None,
        waiting_for: None,
        timeout_step: None,
        completed: Vec::new(),
        history: Vec::new(),
        history_dropped: 0,
        result: None,
        error: None,
        cancel_requested: false,
        resume_as: None,
        idempotency_key: new.idempotency_key.clone(),
        created_at: now,
        updated_at: now,
    }
}

#[async_trait]
impl OrchestrationStore for MemoryStore {
    async fn orchestration_insert(
        &self,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted> {
        let now = self.now();
        let mut st = self.lock();
        if let Some(r) = st.orchestrations.records.get(&new.id) {
            if r.tenant_id != new.tenant_id {
                return Err(Error::Conflict(format!(
                    "orchestration id {} is taken",
                    new.id
                )));
            }
            return Ok(OrchestrationInserted {
                result: InsertResult::IdExists,
                record: r.clone(),
            });
        }
        if let Some(key) = &new.idempotency_key
            && let Some(r) = st
                .orchestrations
                .keys
                .get(&(new.tenant_id, key.clone()))
                .and_then(|id| st.orchestrations.records.get(id))
        {
            return Ok(OrchestrationInserted {
                result: InsertResult::KeyExists,
                record: r.clone(),
            });
        }
        st.insertable(first)?;
        let record = stamp(new, now);
        if let Some(key) = &new.idempotency_key {
            st.orchestrations
                .keys
                .insert((new.tenant_id, key.clone()), new.id);
        }
        st.orchestrations.records.insert(new.id, record.clone());
        st.insert(first, now);
        drop(st);
        self.wake.counted(&first.lane);
        Ok(OrchestrationInserted {
            result: InsertResult::Inserted,
            record,
        })
    }

    async fn orchestration_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Orchestration>> {
        Ok(self.lock().record(tenant, id).cloned())
    }

    async fn orchestration_list(&self, f: &OrchestrationFilter) -> Result<Vec<Orchestration>> {
        let st = self.lock();
        let mut out: Vec<Orchestration> = st
            .orchestrations
            .records
            .values()
            .filter(|r| f.tenant_id.is_none_or(|t| r.tenant_id == t))
            .filter(|r| f.status.is_none_or(|s| r.status == s))
            .filter(|r| f.kind.as_ref().is_none_or(|k| &r.kind == k))
            .cloned()
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse((r.created_at, r.id)));
        out.truncate(f.limit as usize);
        Ok(out)
    }

    async fn orchestration_advance(
        &self,
        claim: &ClaimRef,
        t: &Transition,
    ) -> Result<Orchestration> {
        let now = self.now();
        let mut st = self.lock();
        // The claim's fence first; the record's fence and the inserts are
        // checked by `apply_and_match` before it writes anything, and the
        // lock is held throughout, so both land or neither does.
        st.fenced(claim, now)?;
        let r = st.apply_and_match(t, now)?;
        let item = st.fenced(claim, now)?;
        item.status = Status::Done;
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        let lane = r.lane.clone();
        drop(st);
        self.wake.counted(&lane);
        Ok(r)
    }

    async fn orchestration_update(&self, t: &Transition) -> Result<Orchestration> {
        let now = self.now();
        let r = self.lock().apply_and_match(t, now)?;
        self.wake.counted(&r.lane);
        Ok(r)
    }

    async fn orchestration_due(&self, limit: u32) -> Result<Vec<Orchestration>> {
        let now = self.now();
        let st = self.lock();
        let mut due: Vec<Orchestration> = st
            .orchestrations
            .records
            .values()
            .filter(|r| r.status == OrchestrationStatus::Parked)
            .filter(|r| r.parked_until.is_some_and(|t| t <= now))
            .cloned()
            .collect();
        due.sort_by_key(|r| (r.parked_until, r.id));
        due.truncate(limit as usize);
        Ok(due)
    }

    async fn orchestration_dead_steps(&self, limit: u32) -> Result<Vec<DeadStep>> {
        let st = self.lock();
        let mut dead: Vec<DeadStep> = st
            .orchestrations
            .records
            .values()
            .filter(|r| {
                matches!(
                    r.status,
                    OrchestrationStatus::Running | OrchestrationStatus::Compensating
                )
            })
            .filter_map(|r| {
                let key = format!("{}:{}:{}", crate::orchestration::STEP_KIND, r.id, r.version);
                let id = st.keys.get(&(r.tenant_id, key))?;
                let item = st
                    .items
                    .get(id)
                    .filter(|i| matches!(i.status, Status::Failed | Status::Cancelled))?;
                Some(DeadStep {
                    record: r.clone(),
                    attempts: item.attempts,
                    error: item.last_error.clone(),
                    cancelled: item.status == Status::Cancelled,
                    failed_at: item.updated_at,
                })
            })
            .collect();
        dead.sort_by_key(|d| (d.record.updated_at, d.record.id));
        dead.truncate(limit as usize);
        Ok(dead)
    }

    async fn orchestration_parked_count(&self) -> Result<i64> {
        let st = self.lock();
        let stranded = |r: &Orchestration| {
            let key = format!("{}:{}:{}", crate::orchestration::STEP_KIND, r.id, r.version);
            st.keys
                .get(&(r.tenant_id, key))
                .and_then(|id| st.items.get(id))
                .is_some_and(|i| matches!(i.status, Status::Failed | Status::Cancelled))
        };
        let n = st
            .orchestrations
            .records
            .values()
            .filter(|r| match r.status {
                OrchestrationStatus::Parked | OrchestrationStatus::Stuck => true,
                OrchestrationStatus::Running | OrchestrationStatus::Compensating => stranded(r),
                _ => false,
            })
            .count();
        Ok(i64::try_from(n).unwrap_or(i64::MAX))
    }

    async fn orchestration_request_cancel(
        &self,
        tenant: Uuid,
        id: Uuid,
        expected_version: i64,
    ) -> Result<Orchestration> {
        let mut st = self.lock();
        let Some(r) = st
            .orchestrations
            .records
            .get_mut(&id)
            .filter(|r| r.tenant_id == tenant)
        else {
            return Err(Error::NotFound(format!("orchestration {id}")));
        };
        if r.version != expected_version || r.status != OrchestrationStatus::Running {
            return Err(Error::Conflict(format!(
                "orchestration {id}: running at version {expected_version} expected, {} at {} stored",
                r.status, r.version
            )));
        }
        // The version stays: the step in flight must still land.
        r.cancel_requested = true;
        Ok(r.clone())
    }

    async fn orchestration_purge(&self, before: DateTime<Utc>, limit: u32) -> Result<u64> {
        let mut st = self.lock();
        let mut gone: Vec<(DateTime<Utc>, Uuid)> = st
            .orchestrations
            .records
            .values()
            .filter(|r| r.status.is_final() && r.updated_at < before)
            .map(|r| (r.updated_at, r.id))
            .collect();
        gone.sort();
        gone.truncate(limit as usize);
        let mut n = 0u64;
        for (_, id) in &gone {
            if let Some(r) = st.orchestrations.records.remove(id) {
                n += 1;
                if let Some(k) = &r.idempotency_key {
                    st.orchestrations.keys.remove(&(r.tenant_id, k.clone()));
                }
            }
        }
        let sigs = &mut st.orchestrations.signals;
        let before_len = sigs.len();
        sigs.retain(|s| !gone.iter().any(|(_, id)| *id == s.orchestration_id));
        n += (before_len - sigs.len()) as u64;
        let mut budget = limit as usize;
        let before_len = sigs.len();
        sigs.retain(|s| {
            let old = s.consumed_at.is_some_and(|c| c < before);
            if old && budget > 0 {
                budget -= 1;
                return false;
            }
            true
        });
        n += (before_len - sigs.len()) as u64;
        Ok(n)
    }

    async fn orchestration_signal(&self, signal: &Signal) -> Result<SignalOutcome> {
        let now = self.now();
        let mut st = self.lock();
        let Some(r) = st
            .record(signal.tenant_id, signal.orchestration_id)
            .cloned()
        else {
            return Err(Error::NotFound(format!(
                "orchestration {}",
                signal.orchestration_id
            )));
        };
        if let Some(key) = &signal.idempotency_key
            && st.orchestrations.signals.iter().any(|s| {
                s.tenant_id == signal.tenant_id
                    && s.orchestration_id == signal.orchestration_id
                    && s.idempotency_key.as_ref() == Some(key)
            })
        {
            return Ok(SignalOutcome::Duplicate);
        }
        // A resent key is the same delivery even after the orchestration
        // finished; only a new signal is refused.
        if r.status.is_final() {
            return Err(Error::Conflict(format!(
                "orchestration {} is {}: it takes no more signals",
                r.id, r.status
            )));
        }
        let mut stored = signal.clone();
        stored.consumed_at = None;
        stored.created_at = now;
        st.orchestrations.signals.push(stored.clone());
        if r.status == OrchestrationStatus::Parked
            && r.waiting_for.as_deref() == Some(signal.name.as_str())
            && let Some(sig) = st.pending_signal(&r, &signal.name)
        {
            let woke = match st.apply_and_match(&wake_on_signal(&r, &sig, now), now) {
                Ok(w) => w,
                Err(e) => {
                    // All or nothing: the signal goes with the refused wake-up.
                    st.orchestrations.signals.retain(|s| s.id != stored.id);
                    return Err(e);
                }
            };
            drop(st);
            self.wake.counted(&woke.lane);
            return Ok(SignalOutcome::Woke);
        }
        Ok(SignalOutcome::Kept)
    }

    async fn orchestration_signal_list(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Signal>> {
        let st = self.lock();
        Ok(st
            .orchestrations
            .signals
            .iter()
            .filter(|s| s.tenant_id == tenant && s.orchestration_id == id)
            .cloned()
            .collect())
    }
}
