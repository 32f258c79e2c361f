//! The memory backend: the storage contract over an in-process table behind
//! one lock, for fast tests of handlers and as the executable reference of
//! the contract's semantics.
//!
//! Every call takes the lock once, so each transition is atomic exactly as a
//! single SQL statement is. Time comes from the injected [`Clock`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::{AuditEntry, Backend, ClaimRef, Clock, Store, SystemClock, WorkerRow};
use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, Item, NewItem, Status};
use drover_core::rules;

mod access;
mod audit;
mod events;
mod fairness;
mod item;
mod lanes;
mod limits;
mod links;
mod orchestration;
mod outbox;
mod projector;
mod rates;
mod reconcile;
mod runs;
mod schedule;
mod sweep;
mod throughput;
mod vacuum;
mod worker;

#[derive(Default)]
struct State {
    items: HashMap<Uuid, Item>,
    /// Each item's place in enqueue order (an ordered group's order).
    seqs: HashMap<Uuid, u64>,
    /// The next enqueue's place.
    next_seq: u64,
    keys: HashMap<(Uuid, String), Uuid>,
    /// Active keys by (tenant, kind, key): the item that last took each; it
    /// holds the key only while it is pending or claimed.
    active_keys: HashMap<(Uuid, String, String), Uuid>,
    audit: Vec<AuditEntry>,
    workers: HashMap<String, WorkerRow>,
    /// The sweep lease: its token and expiry, while held.
    sweep_lease: Option<(Uuid, DateTime<Utc>)>,
    /// When the last completed sweep pass ended.
    sweep_last_pass: Option<DateTime<Utc>>,
    orchestrations: orchestration::Records,
    sync: reconcile::Sync,
    schedules: std::collections::BTreeMap<String, crate::schedule::ScheduleRow>,
    outbox: outbox::Rows,
    events: events::Logs,
    lanes: std::collections::BTreeMap<String, crate::lane::LaneState>,
    limits:
        std::collections::BTreeMap<(crate::limits::LimitScope, bool), crate::limits::LimitSetting>,
    /// Rate settings by scope and whether the operator set them.
    rates: std::collections::BTreeMap<(crate::limits::LimitScope, bool), crate::rates::RateSetting>,
    /// Rate cells: each scope key's theoretical arrival time.
    cells: HashMap<String, DateTime<Utc>>,
    /// Fair share: operators' weights and lane settings.
    fair: crate::fairness::FairSettings,
    /// Fair share: each lane's virtual time and each (lane, tenant)'s pass
    /// with its starts.
    passes: fairness::Lanes,
    /// Who closed each closure's cell (actor, item), by key.
    closed_by: HashMap<String, (Uuid, Option<Uuid>)>,
    tokens: Vec<crate::access::TokenRow>,
    markers: HashMap<crate::access::MarkerKey, access::Marker>,
    links: links::Links,
    /// Each item's last runs (the attempt history).
    runs: HashMap<Uuid, runs::Kept>,
    /// The queue wait rollup: the oldest waiting age in ms by minute and
    /// lane (system-wide, as migration 0049's table).
    waits: std::collections::BTreeMap<(DateTime<Utc>, String), i64>,
}

/// The in-memory store.
pub struct MemoryStore {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    wake: super::wake::WakeBus,
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
        MemoryStore {
            state: Mutex::new(State::default()),
            clock,
            wake: super::wake::WakeBus::new(),
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
        group: new.group.clone(),
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
        idempotency_key: new.stored_key().map(str::to_owned),
        created_by: new.created_by,
        request_id: new.request_id.clone(),
        traceparent: new.traceparent.clone(),
        created_at: new.created_at,
        updated_at: now,
        updated_by: new.created_by,
        result: None,
        progress: None,
        active_key: new.active_key().map(str::to_owned),
    }
}

/// The single enqueue's answer for an id held by another tenant.
pub(super) fn id_taken(id: Uuid) -> Error {
    Error::Conflict(format!("item id {id} is already in use"))
}

pub(super) fn clear_claim(item: &mut Item) {
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
        if let Some(key) = new.stored_key()
            && let Some(existing) = self
                .keys
                .get(&(new.tenant_id, key.to_owned()))
                .and_then(|id| self.items.get(id))
        {
            return (InsertResult::KeyExists, Some(existing.clone()));
        }
        let active = new
            .active_key()
            .map(|k| (new.tenant_id, new.kind.clone(), k.to_owned()));
        if let Some(existing) = active
            .as_ref()
            .and_then(|a| self.active_keys.get(a))
            .and_then(|id| self.items.get(id))
            .filter(|i| matches!(i.status, Status::Pending | Status::Claimed))
        {
            return (InsertResult::KeyExists, Some(existing.clone()));
        }
        if id_holder.is_some() {
            return (InsertResult::IdTaken, None);
        }
        if let Some(key) = new.stored_key() {
            self.keys.insert((new.tenant_id, key.to_owned()), new.id);
        }
        if let Some(a) = active {
            self.active_keys.insert(a, new.id);
        }
        let item = stamp(new, now);
        self.next_seq += 1;
        self.seqs.insert(item.id, self.next_seq);
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
            self.finished(id, now);
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
        self.wake.counted(lane);
    }

    async fn migrate(&self) -> Result<()> {
        Ok(())
    }

    async fn wakeups(&self) -> Result<broadcast::Receiver<super::Wake>> {
        Ok(self.wake.subscribe())
    }
}
