//! The outbox of the memory backend, under the store's one lock: each call
//! is one atomic step, as a statement is. There is no caller transaction to
//! join here: a row is written by [`OutboxStore::outbox_insert`] alone.
//! An event row is claimed only while no live claim holds an event row of
//! its tenant (one tenant's events are relayed by one claim at a time).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::MemoryStore;
use crate::outbox::{
    NewOutboxRow, OUTBOX_WAKE, OutboxClaim, OutboxClaimParams, OutboxFailOutcome, OutboxFailParams,
    OutboxFilter, OutboxRow, OutboxStats, OutboxStatus, OutboxStore, OutboxTarget,
};
use drover_core::error::{Error, Result};
use drover_core::item::bound_error;
use drover_core::rules::to_chrono;

/// The rows by id.
pub(super) type Rows = HashMap<Uuid, OutboxRow>;

fn held(r: &OutboxRow, c: &OutboxClaim, now: DateTime<Utc>) -> bool {
    r.tenant_id == c.tenant_id
        && r.claim_token == Some(c.token)
        && r.status == OutboxStatus::Pending
        && r.lease_expires_at.is_some_and(|l| l > now)
}

fn is_event(r: &OutboxRow) -> bool {
    matches!(r.target(), Some(OutboxTarget::Event(_)))
}

fn age(now: DateTime<Utc>, rows: &Rows) -> f64 {
    rows.values()
        .filter(|r| r.status == OutboxStatus::Pending)
        .map(|r| r.created_at)
        .min()
        .map_or(0.0, |t| {
            ((now - t).num_microseconds().unwrap_or(0) as f64 / 1e6).max(0.0)
        })
}

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn outbox_insert(&self, row: &NewOutboxRow) -> Result<()> {
        let now = self.now();
        {
            let mut st = self.lock();
            st.outbox.entry(row.id).or_insert_with(|| OutboxRow {
                id: row.id,
                tenant_id: row.tenant_id,
                kind: row.kind.clone(),
                payload: row.payload.clone(),
                lane: Some(row.lane.clone()),
                priority: row.priority,
                max_attempts: Some(row.max_attempts),
                group: row.group.clone(),
                actor: row.actor,
                request_id: row.request_id.clone(),
                traceparent: row.traceparent.clone(),
                created_at: row.created_at,
                status: OutboxStatus::Pending,
                attempts: 0,
                available_at: now,
                last_error: None,
                claim_token: None,
                lease_expires_at: None,
                relayed_at: None,
            });
        }
        self.wake.counted(OUTBOX_WAKE);
        Ok(())
    }

    async fn outbox_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<OutboxRow>> {
        Ok(self
            .lock()
            .outbox
            .get(&id)
            .filter(|r| r.tenant_id == tenant)
            .cloned())
    }

    async fn outbox_claim(&self, p: &OutboxClaimParams) -> Result<Vec<OutboxRow>> {
        let now = self.now();
        let token = Uuid::new_v4();
        let lease = now + to_chrono(p.lease);
        let mut st = self.lock();
        // Tenants whose events another live claim relays: their event rows
        // wait, so one tenant's events are relayed by one claim at a time.
        let relaying: HashSet<Uuid> = st
            .outbox
            .values()
            .filter(|r| {
                is_event(r)
                    && r.status == OutboxStatus::Pending
                    && r.claim_token.is_some()
                    && r.lease_expires_at.is_some_and(|l| l > now)
            })
            .map(|r| r.tenant_id)
            .collect();
        let mut ready: Vec<&mut OutboxRow> = st
            .outbox
            .values_mut()
            .filter(|r| {
                r.status == OutboxStatus::Pending
                    && r.available_at <= now
                    && r.lease_expires_at.is_none_or(|l| l <= now)
                    && !(is_event(r) && relaying.contains(&r.tenant_id))
            })
            .collect();
        ready.sort_by_key(|r| (r.created_at, r.id));
        Ok(ready
            .into_iter()
            .take(p.limit as usize)
            .map(|r| {
                r.claim_token = Some(token);
                r.lease_expires_at = Some(lease);
                r.clone()
            })
            .collect())
    }

    async fn outbox_complete(&self, claims: &[OutboxClaim]) -> Result<Vec<Uuid>> {
        let now = self.now();
        let mut st = self.lock();
        let mut done = Vec::new();
        for c in claims {
            if let Some(r) = st.outbox.get_mut(&c.id).filter(|r| held(r, c, now)) {
                r.status = OutboxStatus::Done;
                r.relayed_at = Some(now);
                r.claim_token = None;
                r.lease_expires_at = None;
                done.push(c.id);
            }
        }
        Ok(done)
    }

    async fn outbox_fail(
        &self,
        c: &OutboxClaim,
        p: &OutboxFailParams,
    ) -> Result<OutboxFailOutcome> {
        let now = self.now();
        let mut st = self.lock();
        let Some(r) = st.outbox.get_mut(&c.id).filter(|r| held(r, c, now)) else {
            return Err(Error::Conflict(format!(
                "outbox row {} is not held by this relay claim",
                c.id
            )));
        };
        r.attempts += 1;
        r.last_error = Some(bound_error(&p.error));
        r.claim_token = None;
        r.lease_expires_at = None;
        if r.attempts >= p.max_attempts {
            r.status = OutboxStatus::Failed;
            Ok(OutboxFailOutcome::Parked)
        } else {
            r.available_at = now + to_chrono(p.retry_delay);
            Ok(OutboxFailOutcome::Retrying {
                available_at: r.available_at,
            })
        }
    }

    async fn outbox_list(&self, f: &OutboxFilter) -> Result<Vec<OutboxRow>> {
        let st = self.lock();
        let mut rows: Vec<OutboxRow> = st
            .outbox
            .values()
            .filter(|r| f.tenant_id.is_none_or(|t| r.tenant_id == t))
            .filter(|r| f.status.is_none_or(|s| r.status == s))
            .cloned()
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse((r.created_at, r.id)));
        rows.truncate(f.limit as usize);
        Ok(rows)
    }

    async fn outbox_stats(&self) -> Result<OutboxStats> {
        let now = self.now();
        let st = self.lock();
        let count = |s: OutboxStatus| st.outbox.values().filter(|r| r.status == s).count() as i64;
        Ok(OutboxStats {
            pending: count(OutboxStatus::Pending),
            done: count(OutboxStatus::Done),
            failed: count(OutboxStatus::Failed),
            lag_seconds: age(now, &st.outbox),
        })
    }

    async fn outbox_lag(&self) -> Result<f64> {
        let now = self.now();
        Ok(age(now, &self.lock().outbox))
    }

    async fn outbox_purge(&self, before: DateTime<Utc>, _rotate_after: Duration) -> Result<u64> {
        let mut st = self.lock();
        let n = st.outbox.len();
        st.outbox.retain(|_, r| {
            !(r.status == OutboxStatus::Done && r.relayed_at.is_some_and(|t| t < before))
        });
        Ok((n - st.outbox.len()) as u64)
    }
}
