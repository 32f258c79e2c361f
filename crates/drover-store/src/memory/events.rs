//! The event log of the memory backend, under the store's one lock: an
//! append is one atomic step, so positions are dense and in commit order.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::MemoryStore;
use crate::events::{Event, EventAppended, EventHead, EventPurge, EventStore, NewEvent};
use drover_core::error::Result;

/// A projector's checkpoint for one tenant, with its lease.
#[derive(Debug, Clone, Default)]
pub(super) struct Checkpoint {
    /// The last position applied.
    pub(super) position: i64,
    pub(super) lease: Option<(Uuid, String, DateTime<Utc>)>,
    pub(super) rebuild_requested: bool,
    pub(super) rebuilds: i32,
    pub(super) applied_at: Option<DateTime<Utc>>,
    /// When the row was last written (created, leased, applied, flagged).
    pub(super) written_at: Option<DateTime<Utc>>,
}

/// One tenant's log.
#[derive(Default)]
pub(super) struct TenantLog {
    /// The newest position handed out (kept when the purge empties the log).
    pub(super) head: i64,
    pub(super) head_at: Option<DateTime<Utc>>,
    /// Retained events, in position order.
    pub(super) events: Vec<Event>,
    pub(super) ids: HashMap<Uuid, i64>,
}

/// Every tenant's log, and the projectors' checkpoints (which the purge
/// must not pass).
#[derive(Default)]
pub(super) struct Logs {
    pub(super) tenants: BTreeMap<Uuid, TenantLog>,
    /// (tenant, projector) → checkpoint row.
    pub(super) checkpoints: BTreeMap<(Uuid, String), Checkpoint>,
    /// projector → when a runner of it last recorded itself alive.
    pub(super) runners: BTreeMap<String, DateTime<Utc>>,
}

impl Logs {
    fn append(&mut self, e: &NewEvent, now: DateTime<Utc>) -> EventAppended {
        let log = self.tenants.entry(e.tenant).or_default();
        if let Some(&position) = log.ids.get(&e.id) {
            return EventAppended::AlreadyThere { position };
        }
        log.head += 1;
        log.head_at = Some(now);
        log.ids.insert(e.id, log.head);
        log.events.push(Event {
            tenant: e.tenant,
            position: log.head,
            id: e.id,
            topic: e.topic.clone(),
            payload: e.payload.clone(),
            actor: e.actor,
            request_id: e.request_id.clone(),
            traceparent: e.traceparent.clone(),
            created_at: now,
        });
        EventAppended::Appended { position: log.head }
    }

    /// The projectors the purge must not pass: every one with a checkpoint
    /// row of any tenant or recorded alive.
    pub(super) fn known_projectors(&self) -> std::collections::BTreeSet<&str> {
        self.checkpoints
            .keys()
            .map(|(_, p)| p.as_str())
            .chain(self.runners.keys().map(String::as_str))
            .collect()
    }

    /// The lowest checkpoint over the known projectors of `tenant`, a
    /// projector without a row of the tenant counting as 0 (no known
    /// projector: nothing pins its log).
    fn lowest_checkpoint(&self, tenant: Uuid) -> Option<i64> {
        self.known_projectors()
            .into_iter()
            .map(|p| {
                self.checkpoints
                    .get(&(tenant, p.to_owned()))
                    .map_or(0, |c| c.position)
            })
            .min()
    }
}

#[async_trait]
impl EventStore for MemoryStore {
    async fn event_append_valid(&self, events: &[NewEvent]) -> Result<Vec<EventAppended>> {
        let now = self.now();
        let mut st = self.lock();
        Ok(events.iter().map(|e| st.events.append(e, now)).collect())
    }

    async fn event_read(
        &self,
        tenant: Uuid,
        after: i64,
        topics: &[String],
        limit: u32,
    ) -> Result<Vec<Event>> {
        let st = self.lock();
        let Some(log) = st.events.tenants.get(&tenant) else {
            return Ok(vec![]);
        };
        // Positions are dense among retained events: binary search the start.
        let start = log.events.partition_point(|e| e.position <= after);
        Ok(log.events[start..]
            .iter()
            .filter(|e| topics.is_empty() || topics.contains(&e.topic))
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn event_head(&self, tenant: Uuid) -> Result<EventHead> {
        let st = self.lock();
        Ok(st.events.tenants.get(&tenant).map_or(
            EventHead {
                position: 0,
                at: None,
            },
            |l| EventHead {
                position: l.head,
                at: l.head_at,
            },
        ))
    }

    async fn event_tenants(&self, after: Option<Uuid>, limit: u32) -> Result<Vec<Uuid>> {
        use std::ops::Bound;
        let st = self.lock();
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(st
            .events
            .tenants
            .range((from, Bound::Unbounded))
            .filter(|(_, l)| l.head > 0)
            .map(|(t, _)| *t)
            .take(limit as usize)
            .collect())
    }

    async fn event_purge(&self, before: DateTime<Utc>) -> Result<EventPurge> {
        let mut st = self.lock();
        let mut out = EventPurge::default();
        let tenants: Vec<Uuid> = st.events.tenants.keys().copied().collect();
        for tenant in tenants {
            let floor = st.events.lowest_checkpoint(tenant);
            let Some(log) = st.events.tenants.get_mut(&tenant) else {
                continue;
            };
            let keep_from = log
                .events
                .iter()
                .position(|e| e.created_at >= before || floor.is_some_and(|f| e.position > f))
                .unwrap_or(log.events.len());
            for e in log.events.drain(..keep_from) {
                log.ids.remove(&e.id);
                out.removed += 1;
            }
            if log.events.first().is_some_and(|e| e.created_at < before) {
                out.pinned = true;
            }
        }
        Ok(out)
    }
}
