//! The memory backend: the storage contract over an in-process table behind
//! one lock, for fast tests of handlers and as the executable reference of
//! the contract's semantics.
//!
//! Every call takes the lock once, so each transition is atomic exactly as a
//! single SQL statement is. Time comes from the injected [`Clock`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{InsertResult, Inserted, Item, NewItem, Status, bound_error};
use crate::rules::{self, RetryPolicy, to_chrono};
use crate::store::{
    AuditEntry, Backend, ClaimParams, ClaimRef, Clock, CountRow, FailOutcome, FailParams, Gauges,
    ListFilter, StaleReport, Store, SystemClock, WorkerRow,
};

mod access;
mod lanes;
mod orchestration;
mod schedule;

/// How many wake-ups may queue for a slow subscriber before it lags (and
/// simply claims, which is what a lagged wake-up means).
const WAKE_CAPACITY: usize = 1024;

#[derive(Default)]
struct State {
    items: HashMap<Uuid, Item>,
    keys: HashMap<(Uuid, String), Uuid>,
    audit: Vec<AuditEntry>,
    workers: HashMap<String, WorkerRow>,
    /// The sweep lease: its token and expiry, while held.
    sweep_lease: Option<(Uuid, DateTime<Utc>)>,
    /// When the last completed sweep pass ended.
    sweep_last_pass: Option<DateTime<Utc>>,
    orchestrations: orchestration::Records,
    schedules: std::collections::BTreeMap<String, crate::periodic::ScheduleRow>,
    lanes: std::collections::BTreeMap<String, crate::lane::LaneState>,
    tokens: Vec<crate::access::TokenRow>,
    markers: HashMap<crate::access::MarkerKey, access::Marker>,
}

/// The in-memory store.
pub struct MemoryStore {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    wake: broadcast::Sender<String>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store reading `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        let (wake, _) = broadcast::channel(WAKE_CAPACITY);
        MemoryStore {
            state: Mutex::new(State::default()),
            clock,
            wake,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied
        // transition (each one is a few field writes), so poisoning is safe
        // to ignore.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

fn stamp(new: &NewItem, now: DateTime<Utc>) -> Item {
    Item {
        id: new.id,
        tenant_id: new.tenant_id,
        kind: new.kind.clone(),
        lane: new.lane.clone(),
        payload: new.payload.clone(),
        priority: new.priority,
        status: Status::Pending,
        available_at: new.available_at.unwrap_or(now),
        attempts: 0,
        max_attempts: new.max_attempts,
        claimed_by: None,
        claim_token: None,
        claim_seq: 0,
        lease_expires_at: None,
        last_error: None,
        idempotency_key: new.idempotency_key.clone(),
        created_by: new.created_by,
        request_id: new.request_id.clone(),
        traceparent: new.traceparent.clone(),
        created_at: new.created_at,
        updated_at: now,
        updated_by: new.created_by,
    }
}

/// The single enqueue's answer for an id held by another tenant.
fn id_taken(id: Uuid) -> Error {
    Error::Conflict(format!("item id {id} is already in use"))
}

fn clear_claim(item: &mut Item) {
    item.claimed_by = None;
    item.claim_token = None;
    item.lease_expires_at = None;
}

impl State {
    /// The store's collision rule: the tenant's own item with the id, then
    /// its own item with the key, then (`None`: [`InsertResult::IdTaken`])
    /// an id held by another tenant, whose item never leaves here.
    fn insert(&mut self, new: &NewItem, now: DateTime<Utc>) -> (InsertResult, Option<Item>) {
        let id_holder = self.items.get(&new.id);
        if let Some(existing) = id_holder.filter(|i| i.tenant_id == new.tenant_id) {
            return (InsertResult::IdExists, Some(existing.clone()));
        }
        if let Some(key) = &new.idempotency_key
            && let Some(existing) = self
                .keys
                .get(&(new.tenant_id, key.clone()))
                .and_then(|id| self.items.get(id))
        {
            return (InsertResult::KeyExists, Some(existing.clone()));
        }
        if id_holder.is_some() {
            return (InsertResult::IdTaken, None);
        }
        if let Some(key) = &new.idempotency_key {
            self.keys.insert((new.tenant_id, key.clone()), new.id);
        }
        let item = stamp(new, now);
        self.items.insert(item.id, item.clone());
        (InsertResult::Inserted, Some(item))
    }

    /// The fenced lookup: the item if `claim` still holds it at `now`, else
    /// `Conflict` (or `NotFound` when the tenant has no such item).
    fn fenced(&mut self, claim: &ClaimRef, now: DateTime<Utc>) -> Result<&mut Item> {
        match self.items.get_mut(&claim.id) {
            Some(item) if item.tenant_id == claim.tenant_id => {
                if rules::fence_holds(item, claim.token, now) {
                    Ok(item)
                } else {
                    Err(Error::Conflict(format!(
                        "item {} is no longer held by this claim",
                        claim.id
                    )))
                }
            }
            _ => Err(Error::NotFound(format!("item {}", claim.id))),
        }
    }

    fn dead_letter(&mut self, id: Uuid, now: DateTime<Utc>) {
        if let Some(item) = self.items.get_mut(&id) {
            item.status = Status::Failed;
            let entry = AuditEntry {
                tenant_id: item.tenant_id,
                item_id: item.id,
                action: "dead_letter".into(),
                actor: Uuid::nil(),
                detail: item.last_error.clone(),
                at: now,
            };
            self.audit.push(entry);
        }
    }

    fn tenant_item(&mut self, tenant: Uuid, id: Uuid) -> Result<&mut Item> {
        match self.items.get_mut(&id) {
            Some(item) if item.tenant_id == tenant => Ok(item),
            _ => Err(Error::NotFound(format!("item {id}"))),
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> Backend {
        Backend::Memory
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn wake(&self, lane: &str) {
        let _ = self.wake.send(lane.to_owned());
    }

    async fn migrate(&self) -> Result<()> {
        Ok(())
    }

    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        let now = self.now();
        let id = item.id;
        let (result, item) = self.lock().insert(item, now);
        let Some(item) = item else {
            return Err(id_taken(id));
        };
        if result == InsertResult::Inserted {
            let _ = self.wake.send(item.lane.clone());
        }
        Ok(Inserted { result, item })
    }

    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        let now = self.now();
        let mut lanes: Vec<String> = Vec::new();
        let results = {
            let mut st = self.lock();
            items
                .iter()
                .map(|it| {
                    let (r, _) = st.insert(it, now);
                    if r == InsertResult::Inserted && !lanes.contains(&it.lane) {
                        lanes.push(it.lane.clone());
                    }
                    r
                })
                .collect()
        };
        for lane in lanes {
            let _ = self.wake.send(lane);
        }
        Ok(results)
    }

    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>> {
        Ok(self
            .lock()
            .items
            .get(&id)
            .filter(|i| i.tenant_id == tenant)
            .cloned())
    }

    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>> {
        let st = self.lock();
        Ok(st
            .keys
            .get(&(tenant, key.to_owned()))
            .and_then(|id| st.items.get(id))
            .cloned())
    }

    async fn item_claim(&self, p: &ClaimParams) -> Result<Vec<Item>> {
        let now = self.now();
        let mut st = self.lock();
        let mut candidates: Vec<(i16, DateTime<Utc>, Uuid)> = st
            .items
            .values()
            .filter(|i| {
                i.status == Status::Pending
                    && i.lane == p.lane
                    && i.available_at <= now
                    && (p.kinds.is_empty() || p.kinds.contains(&i.kind))
            })
            .map(|i| (i.priority, i.available_at, i.id))
            .collect();
        candidates.sort_unstable();
        candidates.truncate(p.limit as usize);
        let lease = now + to_chrono(p.lease);
        let mut out = Vec::with_capacity(candidates.len());
        for (_, _, id) in candidates {
            if let Some(item) = st.items.get_mut(&id) {
                item.status = Status::Claimed;
                item.claim_token = Some(Uuid::new_v4());
                item.claim_seq += 1;
                item.claimed_by = Some(p.worker_id.clone());
                item.lease_expires_at = Some(lease);
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                out.push(item.clone());
            }
        }
        Ok(out)
    }

    async fn item_complete(&self, claim: &ClaimRef) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        item.status = Status::Done;
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        Ok(())
    }

    async fn item_complete_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        let now = self.now();
        let mut st = self.lock();
        let mut done = Vec::with_capacity(claims.len());
        for c in claims {
            if let Ok(item) = st.fenced(c, now) {
                item.status = Status::Done;
                clear_claim(item);
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                done.push(c.id);
            }
        }
        Ok(done)
    }

    async fn item_fail(&self, claim: &ClaimRef, p: &FailParams) -> Result<FailOutcome> {
        let now = self.now();
        let (outcome, lane) = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            item.attempts += 1;
            item.last_error = Some(bound_error(&p.error));
            clear_claim(item);
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            let lane = item.lane.clone();
            if p.fatal || rules::is_exhausted(item.attempts, item.max_attempts) {
                st.dead_letter(claim.id, now);
                (FailOutcome::DeadLettered, lane)
            } else {
                item.status = Status::Pending;
                item.available_at = now + to_chrono(p.retry_delay);
                let available_at = item.available_at;
                (FailOutcome::Requeued { available_at }, lane)
            }
        };
        if matches!(outcome, FailOutcome::Requeued { available_at } if available_at <= now) {
            let _ = self.wake.send(lane);
        }
        Ok(outcome)
    }

    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        let now = self.now();
        let (at, lane) = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            item.status = Status::Pending;
            clear_claim(item);
            item.available_at = now + to_chrono(delay);
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            (item.available_at, item.lane.clone())
        };
        if at <= now {
            let _ = self.wake.send(lane);
        }
        Ok(at)
    }

    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        let now = self.now();
        let lane = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            item.status = Status::Pending;
            clear_claim(item);
            item.available_at = now;
            if let Some(n) = note {
                item.last_error = Some(bound_error(n));
            }
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            item.lane.clone()
        };
        let _ = self.wake.send(lane);
        Ok(())
    }

    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        let until = now + to_chrono(lease);
        item.lease_expires_at = Some(until);
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        Ok(until)
    }

    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        item.status = Status::Cancelled;
        item.last_error = Some(bound_error(note));
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        Ok(())
    }

    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        match st.items.get_mut(&id) {
            Some(item) if item.status == Status::Claimed && item.claim_token == Some(token) => {
                item.status = Status::Failed;
                item.last_error = Some("orphaned: tenant gone".into());
                clear_claim(item);
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                Ok(())
            }
            Some(_) => Err(Error::Conflict(format!(
                "item {id} is no longer held by this claim"
            ))),
            None => Err(Error::NotFound(format!("item {id}"))),
        }
    }

    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>> {
        let now = self.now();
        let st = self.lock();
        let mut tenants: Vec<Uuid> = st
            .items
            .values()
            .filter(|i| rules::is_stale(i.status, i.lease_expires_at, now))
            .map(|i| i.tenant_id)
            .collect();
        tenants.sort_unstable();
        tenants.dedup();
        tenants.truncate(limit as usize);
        Ok(tenants)
    }

    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport> {
        let now = self.now();
        let mut st = self.lock();
        let mut stale: Vec<(DateTime<Utc>, Uuid)> = st
            .items
            .values()
            .filter(|i| i.tenant_id == tenant && rules::is_stale(i.status, i.lease_expires_at, now))
            .filter_map(|i| i.lease_expires_at.map(|t| (t, i.id)))
            .collect();
        stale.sort_unstable();
        stale.truncate(limit as usize);
        let mut report = StaleReport::default();
        let mut woke = std::collections::BTreeSet::new();
        for (_, id) in stale {
            let exhausted = {
                let Some(item) = st.items.get_mut(&id) else {
                    continue;
                };
                item.attempts += 1;
                item.last_error = Some("lease expired".into());
                clear_claim(item);
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                if rules::is_exhausted(item.attempts, item.max_attempts) {
                    true
                } else {
                    item.status = Status::Pending;
                    item.available_at = now + to_chrono(policy.nominal_delay(item.attempts));
                    if item.available_at <= now {
                        woke.insert(item.lane.clone());
                    }
                    false
                }
            };
            if exhausted {
                st.dead_letter(id, now);
                report.dead_lettered += 1;
            } else {
                report.requeued += 1;
            }
        }
        drop(st);
        for lane in woke {
            let _ = self.wake.send(lane);
        }
        Ok(report)
    }

    async fn item_purge(&self, before: DateTime<Utc>, _batch: u32) -> Result<u64> {
        let mut st = self.lock();
        let doomed: Vec<Uuid> = st
            .items
            .values()
            .filter(|i| i.status.is_final() && i.updated_at < before)
            .map(|i| i.id)
            .collect();
        for id in &doomed {
            if let Some(Item {
                tenant_id,
                idempotency_key: Some(k),
                ..
            }) = st.items.remove(id)
            {
                st.keys.remove(&(tenant_id, k));
            }
        }
        Ok(doomed.len() as u64)
    }

    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.tenant_item(tenant, id)?;
        if item.status.is_final() {
            return Err(Error::Conflict(format!(
                "item {id} is {} and cannot be cancelled",
                item.status
            )));
        }
        item.status = Status::Cancelled;
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = actor;
        let out = item.clone();
        st.audit.push(AuditEntry {
            tenant_id: tenant,
            item_id: id,
            action: "cancel".into(),
            actor,
            detail: None,
            at: now,
        });
        Ok(out)
    }

    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        let now = self.now();
        let lane;
        let out = {
            let mut st = self.lock();
            let item = st.tenant_item(tenant, id)?;
            if !item.status.is_final() {
                return Err(Error::Conflict(format!(
                    "item {id} is {} and cannot be retried",
                    item.status
                )));
            }
            item.status = Status::Pending;
            item.attempts = 0;
            item.available_at = now;
            item.updated_at = now;
            item.updated_by = actor;
            lane = item.lane.clone();
            let out = item.clone();
            st.audit.push(AuditEntry {
                tenant_id: tenant,
                item_id: id,
                action: "retry".into(),
                actor,
                detail: None,
                at: now,
            });
            out
        };
        let _ = self.wake.send(lane);
        Ok(out)
    }

    async fn item_list(&self, f: &ListFilter) -> Result<Vec<Item>> {
        let st = self.lock();
        let mut out: Vec<Item> = st
            .items
            .values()
            .filter(|i| f.tenant_id.is_none_or(|t| t == i.tenant_id))
            .filter(|i| f.status.is_none_or(|s| s == i.status))
            .filter(|i| f.lane.as_deref().is_none_or(|l| l == i.lane))
            .filter(|i| f.kind.as_deref().is_none_or(|k| k == i.kind))
            .filter(|i| {
                f.key
                    .as_deref()
                    .is_none_or(|k| i.idempotency_key.as_deref() == Some(k))
            })
            .filter(|i| f.created_after.is_none_or(|t| i.created_at >= t))
            .filter(|i| f.created_before.is_none_or(|t| i.created_at < t))
            .filter(|i| {
                f.error_contains.as_deref().is_none_or(|e| {
                    i.last_error
                        .as_deref()
                        .is_some_and(|l| l.to_lowercase().contains(&e.to_lowercase()))
                })
            })
            .filter(|i| f.after.is_none_or(|c| i.id < c.id))
            .cloned()
            .collect();
        out.sort_by_key(|i| std::cmp::Reverse(i.id));
        out.truncate(f.limit as usize);
        Ok(out)
    }

    async fn counts(&self) -> Result<Vec<CountRow>> {
        let st = self.lock();
        let mut map: HashMap<(String, String, Status), i64> = HashMap::new();
        for i in st.items.values() {
            *map.entry((i.lane.clone(), i.kind.clone(), i.status))
                .or_default() += 1;
        }
        let mut rows: Vec<CountRow> = map
            .into_iter()
            .map(|((lane, kind, status), count)| CountRow {
                lane,
                kind,
                status,
                count,
            })
            .collect();
        rows.sort_by(|a, b| (&a.lane, &a.kind, a.status).cmp(&(&b.lane, &b.kind, b.status)));
        Ok(rows)
    }

    async fn gauges(&self) -> Result<Gauges> {
        let now = self.now();
        let st = self.lock();
        let mut oldest: HashMap<String, f64> = HashMap::new();
        let mut failed = 0;
        for i in st.items.values() {
            match i.status {
                Status::Pending => {
                    let age = if i.available_at <= now {
                        (now - i.available_at)
                            .num_microseconds()
                            .unwrap_or(i64::MAX) as f64
                            / 1e6
                    } else {
                        0.0
                    };
                    let e = oldest.entry(i.lane.clone()).or_insert(0.0);
                    if age > *e {
                        *e = age;
                    }
                }
                Status::Failed => failed += 1,
                _ => {}
            }
        }
        let mut oldest: Vec<(String, f64)> = oldest.into_iter().collect();
        oldest.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Gauges {
            oldest_age_seconds: oldest,
            failed,
        })
    }

    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        Ok(self
            .lock()
            .audit
            .iter()
            .filter(|a| a.tenant_id == tenant && a.item_id == item_id)
            .cloned()
            .collect())
    }

    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        let mut row = row.clone();
        row.last_beat_at = self.clock.now();
        row.beat_interval_ms = row.beat_interval_ms.max(1);
        self.lock().workers.insert(row.id.clone(), row);
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        let now = self.clock.now();
        let mut rows: Vec<WorkerRow> = self.lock().workers.values().cloned().collect();
        for r in &mut rows {
            let silent = chrono::Duration::milliseconds(
                i64::from(r.beat_interval_ms) * i64::from(crate::store::LOST_AFTER_BEATS),
            );
            if r.state != "offline" && r.last_beat_at < now - silent {
                r.state = "lost".into();
            }
        }
        rows.sort_by(|a, b| b.last_beat_at.cmp(&a.last_beat_at).then(a.id.cmp(&b.id)));
        Ok(rows)
    }

    async fn worker_purge(&self, older_than: Duration) -> Result<u64> {
        let before = self.clock.now() - crate::rules::to_chrono(older_than);
        let mut st = self.lock();
        let n = st.workers.len();
        st.workers.retain(|_, r| r.last_beat_at >= before);
        Ok((n - st.workers.len()) as u64)
    }

    async fn wakeups(&self) -> Result<broadcast::Receiver<String>> {
        Ok(self.wake.subscribe())
    }

    async fn sweep_lease_take(&self, _holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        let now = self.now();
        let mut st = self.lock();
        if st.sweep_lease.is_some_and(|(_, until)| until > now) {
            return Ok(None);
        }
        let token = Uuid::new_v4();
        st.sweep_lease = Some((token, now + to_chrono(lease)));
        Ok(Some(token))
    }

    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        match &mut st.sweep_lease {
            Some((t, until)) if *t == token && *until > now => {
                *until = now + to_chrono(lease);
                Ok(())
            }
            _ => Err(Error::Conflict("the sweep lease is no longer held".into())),
        }
    }

    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        let now = self.now();
        let mut st = self.lock();
        if st.sweep_lease.is_none_or(|(t, _)| t != token) {
            return Ok(false);
        }
        st.sweep_lease = None;
        if completed {
            st.sweep_last_pass = Some(now);
        }
        Ok(true)
    }

    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(self.lock().sweep_last_pass)
    }
}
