//! Projector checkpoints and leases of the memory backend, under the
//! store's one lock. There is no transaction to share with a projection, so
//! `apply` gets [`ProjectionTx::Detached`] and runs outside the lock; the
//! checkpoint moves afterwards, fenced again: delivery is at least once.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::MemoryStore;
use super::events::{Checkpoint, Logs};
use crate::events::Event;
use crate::projector::{
    CheckpointRow, LeaseParams, ProjectionTx, Projector, ProjectorLag, ProjectorLease,
    ProjectorStore,
};
use drover_core::error::{Error, Result};
use drover_core::rules::to_chrono;

fn lost(lease: &ProjectorLease) -> Error {
    Error::Conflict(format!(
        "projector {} lost its lease for tenant {} (or its checkpoint moved)",
        lease.projector, lease.tenant
    ))
}

/// The checkpoint the lease fences, when the lease still holds at `now`.
fn fenced<'a>(
    logs: &'a mut Logs,
    lease: &ProjectorLease,
    now: DateTime<Utc>,
) -> Result<&'a mut Checkpoint> {
    logs.checkpoints
        .get_mut(&(lease.tenant, lease.projector.clone()))
        .filter(|c| {
            c.position == lease.position
                && c.lease
                    .as_ref()
                    .is_some_and(|(t, _, until)| *t == lease.token && *until > now)
        })
        .ok_or_else(|| lost(lease))
}

#[async_trait]
impl ProjectorStore for MemoryStore {
    async fn projector_lease_take(&self, p: &LeaseParams) -> Result<Option<ProjectorLease>> {
        let now = self.now();
        let mut st = self.lock();
        let c = st
            .events
            .checkpoints
            .entry((p.tenant, p.projector.clone()))
            .or_default();
        if c.lease.as_ref().is_some_and(|(_, _, until)| *until > now) {
            return Ok(None);
        }
        let token = Uuid::new_v4();
        c.lease = Some((token, p.holder.clone(), now + to_chrono(p.lease)));
        c.written_at = Some(now);
        Ok(Some(ProjectorLease {
            projector: p.projector.clone(),
            tenant: p.tenant,
            token,
            position: c.position,
            rebuild_requested: c.rebuild_requested,
        }))
    }

    async fn projector_lease_release(&self, lease: &ProjectorLease) -> Result<()> {
        let mut st = self.lock();
        if let Some(c) = st
            .events
            .checkpoints
            .get_mut(&(lease.tenant, lease.projector.clone()))
            && c.lease.as_ref().is_some_and(|(t, _, _)| *t == lease.token)
        {
            c.lease = None;
        }
        Ok(())
    }

    async fn projector_apply_valid(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        events: &[Event],
        projector: &dyn Projector,
    ) -> Result<ProjectorLease> {
        let Some(last) = events.last() else {
            return Ok(lease.clone());
        };
        fenced(&mut self.lock().events, lease, self.now())?;
        let topics = projector.topics();
        for e in events {
            if topics.is_empty() || topics.contains(&e.topic) {
                projector.apply(e, &mut ProjectionTx::Detached).await?;
            }
        }
        let now = self.now();
        let mut st = self.lock();
        let c = fenced(&mut st.events, lease, now)?;
        c.position = last.position.max(c.position);
        c.applied_at = Some(now);
        c.written_at = Some(now);
        if let Some((_, _, until)) = &mut c.lease {
            *until = now + to_chrono(renew);
        }
        Ok(ProjectorLease {
            position: c.position,
            rebuild_requested: c.rebuild_requested,
            ..lease.clone()
        })
    }

    async fn projector_rebuild(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        projector: &dyn Projector,
    ) -> Result<ProjectorLease> {
        fenced(&mut self.lock().events, lease, self.now())?;
        projector
            .reset(lease.tenant, &mut ProjectionTx::Detached)
            .await?;
        let now = self.now();
        let mut st = self.lock();
        let c = fenced(&mut st.events, lease, now)?;
        c.position = 0;
        c.rebuild_requested = false;
        c.rebuilds += 1;
        c.written_at = Some(now);
        if let Some((_, _, until)) = &mut c.lease {
            *until = now + to_chrono(renew);
        }
        Ok(ProjectorLease {
            position: 0,
            rebuild_requested: false,
            ..lease.clone()
        })
    }

    async fn projector_request_rebuild(
        &self,
        projector: &str,
        tenant: Option<Uuid>,
    ) -> Result<u64> {
        let now = self.now();
        let mut st = self.lock();
        if let Some(t) = tenant {
            let c = st
                .events
                .checkpoints
                .entry((t, projector.to_owned()))
                .or_default();
            c.rebuild_requested = true;
            c.written_at = Some(now);
            return Ok(1);
        }
        let mut n = 0;
        for ((_, name), c) in st.events.checkpoints.iter_mut() {
            if name == projector {
                c.rebuild_requested = true;
                c.written_at = Some(now);
                n += 1;
            }
        }
        Ok(n)
    }

    async fn projector_checkpoints(&self, projector: Option<&str>) -> Result<Vec<CheckpointRow>> {
        let now = self.now();
        let st = self.lock();
        let mut rows: Vec<CheckpointRow> = st
            .events
            .checkpoints
            .iter()
            .filter(|((_, name), _)| projector.is_none_or(|p| p == name))
            .map(|((tenant, name), c)| {
                let live = c.lease.as_ref().filter(|(_, _, until)| *until > now);
                CheckpointRow {
                    projector: name.clone(),
                    tenant: *tenant,
                    position: c.position,
                    holder: c.lease.as_ref().map(|(_, h, _)| h.clone()),
                    lease_expires_at: live.map(|(_, _, until)| *until),
                    rebuild_requested: c.rebuild_requested,
                    rebuilds: c.rebuilds,
                    applied_at: c.applied_at,
                }
            })
            .collect();
        rows.sort_by(|a, b| (&a.projector, a.tenant).cmp(&(&b.projector, b.tenant)));
        Ok(rows)
    }

    async fn projector_pending(
        &self,
        projector: &str,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Uuid>> {
        use std::ops::Bound;
        let st = self.lock();
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        Ok(st
            .events
            .tenants
            .range((from, Bound::Unbounded))
            .filter(|(t, log)| {
                let c = st.events.checkpoints.get(&(**t, projector.to_owned()));
                log.head > c.map_or(0, |c| c.position) || c.is_some_and(|c| c.rebuild_requested)
            })
            .map(|(t, _)| *t)
            .take(limit as usize)
            .collect())
    }

    async fn projector_lag(&self, projector: &str) -> Result<ProjectorLag> {
        let now = self.now();
        let st = self.lock();
        let mut lag = ProjectorLag::default();
        for (t, log) in &st.events.tenants {
            let position = st
                .events
                .checkpoints
                .get(&(*t, projector.to_owned()))
                .map_or(0, |c| c.position);
            if log.head <= position {
                continue;
            }
            lag.tenants += 1;
            lag.behind_events += log.head - position;
            let start = log.events.partition_point(|e| e.position <= position);
            if let Some(e) = log.events.get(start) {
                let age = (now - e.created_at).num_milliseconds().max(0) as f64 / 1000.0;
                lag.behind_seconds = lag.behind_seconds.max(age);
            }
        }
        Ok(lag)
    }

    async fn projector_seen(&self, projector: &str) -> Result<()> {
        let now = self.now();
        self.lock().events.runners.insert(projector.to_owned(), now);
        Ok(())
    }

    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64> {
        let mut st = self.lock();
        let logs = &mut st.events;
        let live: std::collections::BTreeSet<String> = logs
            .runners
            .iter()
            .filter(|(_, at)| **at >= before)
            .map(|(p, _)| p.clone())
            .collect();
        let n = logs.checkpoints.len();
        logs.checkpoints
            .retain(|(_, p), c| live.contains(p) || c.written_at.is_some_and(|w| w >= before));
        logs.runners.retain(|_, at| *at >= before);
        Ok((n - logs.checkpoints.len()) as u64)
    }
}
