//! [`ItemStore`] in memory: each call one step under the store's lock, so
//! each transition is as atomic as one SQL statement, and the fence is the
//! same check (token, `claimed`, lease not passed on the injected clock).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{MemoryStore, clear_claim, id_taken};
use crate::links::LinkStore;
use crate::{
    AuditEntry, ClaimParams, ClaimRef, Completion, CountRow, FailOutcome, FailParams, Gauges,
    ItemStore, ListFilter, StaleReport,
};
use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Progress, Status, bound_error};
use drover_core::rules::{self, RetryPolicy, to_chrono};

#[async_trait]
impl ItemStore for MemoryStore {
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        if item.is_linked() {
            return crate::links::one(self.links_insert(std::slice::from_ref(item)).await?);
        }
        let now = self.now();
        let id = item.id;
        let (result, item) = self.lock().insert(item, now);
        let Some(item) = item else {
            return Err(id_taken(id));
        };
        if result == InsertResult::Inserted {
            self.wake.counted(&item.lane);
        }
        Ok(Inserted { result, item })
    }

    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        if items.iter().any(NewItem::is_linked) {
            let out = self.links_insert(items).await?;
            return Ok(out.into_iter().map(|o| o.result).collect());
        }
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
            self.wake.counted(&lane);
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
        let mut guard = self.lock();
        // A plain borrow of the state, so that the claim borrows its fields
        // apart (the items while the passes move).
        let st = &mut *guard;
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
        let limits = st.limits_in_force();
        let rates = st.rates_in_force();
        // A lane shared by group shares one tenant's starts too.
        let by_group = st.fair.by_group(&p.lane);
        let fair =
            st.fair.on(&p.lane) && (by_group || super::fairness::many_tenants(st, &candidates));
        if limits.is_empty() && rates.is_empty() && !fair {
            candidates.truncate(p.limit as usize);
        } else {
            // Admitted in claim order (or fair-share order) while every
            // limit that applies has a free slot; an item held back is
            // left pending, untouched.
            let mut admission = st.admission(&limits);
            let heads = st.group_heads(&limits);
            // The rates on the store's clock, under the same lock as the
            // claim: a start is admitted only when its cells have room.
            let mut cells =
                crate::rates::Cells::new(now, st.cells.iter().map(|(k, t)| (k.clone(), *t)));
            let items = &st.items;
            let mut admit = |c: &(i16, DateTime<Utc>, Uuid)| {
                let Some(item) = items.get(&c.2) else {
                    return false;
                };
                if heads.holds_back(item) {
                    return false;
                }
                let rate_keys = crate::rates::rate_keys_of(
                    &rates,
                    &item.lane,
                    &item.kind,
                    item.tenant_id,
                    item.group.as_deref(),
                );
                // Rates first: a start the rate holds back takes no slot.
                if !rate_keys.is_empty() && !cells.would_admit(&rate_keys) {
                    return false;
                }
                if admission.admit(&super::limits::item_keys(&limits, item)) {
                    cells.admit(&rate_keys);
                    return true;
                }
                false
            };
            let admitted = if fair && by_group {
                let lists = super::fairness::by_tenant(items, &st.fair, candidates);
                let (work, names) =
                    super::fairness::by_tenant_and_group(items, &st.passes, &p.lane, lists);
                let mut passes = st.passes.read(&p.lane);
                let (out, inner) = passes.share_work(work, p.limit as usize, |c| *c, &mut admit);
                st.passes.write(&p.lane, &passes);
                st.passes.write_groups(&p.lane, &inner, &names);
                out
            } else if fair {
                let lists = super::fairness::by_tenant(items, &st.fair, candidates);
                let mut passes = st.passes.read(&p.lane);
                let out = passes.share(lists, p.limit as usize, |c| *c, &mut admit);
                st.passes.write(&p.lane, &passes);
                out
            } else {
                let mut out = Vec::with_capacity(p.limit as usize);
                for c in candidates {
                    if out.len() == p.limit as usize {
                        break;
                    }
                    if admit(&c) {
                        out.push(c);
                    }
                }
                out
            };
            cells.note_rate_limited();
            for (k, t) in cells.changed() {
                st.cells.insert(k.clone(), *t);
            }
            candidates = admitted;
        }
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

    async fn item_complete_with(
        &self,
        claim: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        let before = item.clone();
        item.status = Status::Done;
        clear_claim(item);
        item.result = result.cloned();
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        st.end_run(&before);
        st.finished(claim.id, now);
        self.flush_wakes(&mut st);
        Ok(())
    }

    async fn item_complete_many_with(&self, done: &[Completion]) -> Result<Vec<Uuid>> {
        let now = self.now();
        let mut st = self.lock();
        let mut landed = Vec::with_capacity(done.len());
        for c in done {
            if let Ok(item) = st.fenced(&c.claim, now) {
                let before = item.clone();
                item.status = Status::Done;
                clear_claim(item);
                item.result = c.result.clone();
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                st.end_run(&before);
                landed.push(c.claim.id);
                st.finished(c.claim.id, now);
            }
        }
        self.flush_wakes(&mut st);
        Ok(landed)
    }

    async fn item_progress(&self, claim: &ClaimRef, progress: &Progress) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        // updated_at stays the claim's start (the run history reads it).
        item.progress = Some(progress.clone());
        Ok(())
    }

    async fn item_fail(&self, claim: &ClaimRef, p: &FailParams) -> Result<FailOutcome> {
        let now = self.now();
        let (outcome, lane) = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            let before = item.clone();
            item.attempts += 1;
            item.last_error = Some(bound_error(&p.error));
            clear_claim(item);
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            let lane = item.lane.clone();
            let out = if p.fatal || rules::is_exhausted(item.attempts, item.max_attempts) {
                st.dead_letter(claim.id, now);
                self.flush_wakes(&mut st);
                (FailOutcome::DeadLettered, lane)
            } else {
                item.status = Status::Pending;
                item.available_at = now + to_chrono(p.retry_delay);
                let available_at = item.available_at;
                (FailOutcome::Requeued { available_at }, lane)
            };
            st.end_run(&before);
            out
        };
        if matches!(outcome, FailOutcome::Requeued { available_at } if available_at <= now) {
            self.wake.counted(&lane);
        }
        Ok(outcome)
    }

    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        let now = self.now();
        let (at, lane) = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            let before = item.clone();
            item.status = Status::Pending;
            clear_claim(item);
            item.available_at = now + to_chrono(delay);
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            let out = (item.available_at, item.lane.clone());
            st.end_run(&before);
            out
        };
        if at <= now {
            self.wake.counted(&lane);
        }
        Ok(at)
    }

    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        let now = self.now();
        let lane = {
            let mut st = self.lock();
            let item = st.fenced(claim, now)?;
            let before = item.clone();
            item.status = Status::Pending;
            clear_claim(item);
            item.available_at = now;
            if let Some(n) = note {
                item.last_error = Some(bound_error(n));
            }
            item.updated_at = now;
            item.updated_by = Uuid::nil();
            let lane = item.lane.clone();
            st.end_run(&before);
            lane
        };
        self.wake.counted(&lane);
        Ok(())
    }

    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        let until = now + to_chrono(lease);
        // updated_at is left alone: a claimed item's updated_at is its
        // claim's start, which the run history reads when the claim ends.
        item.lease_expires_at = Some(until);
        Ok(until)
    }

    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.fenced(claim, now)?;
        let before = item.clone();
        item.status = Status::Cancelled;
        item.last_error = Some(bound_error(note));
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = Uuid::nil();
        st.end_run(&before);
        st.finished(claim.id, now);
        self.flush_wakes(&mut st);
        Ok(())
    }

    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        match st.items.get_mut(&id) {
            Some(item) if item.status == Status::Claimed && item.claim_token == Some(token) => {
                let before = item.clone();
                item.status = Status::Failed;
                item.last_error = Some("orphaned: tenant gone".into());
                clear_claim(item);
                item.updated_at = now;
                item.updated_by = Uuid::nil();
                st.end_run(&before);
                st.finished(id, now);
                self.flush_wakes(&mut st);
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
            let Some(before) = st.items.get(&id).cloned() else {
                continue;
            };
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
            st.end_run(&before);
        }
        self.flush_wakes(&mut st);
        drop(st);
        for lane in woke {
            self.wake.counted(&lane);
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
            st.seqs.remove(id);
            st.links_purged(*id);
            if let Some(gone) = st.items.remove(id) {
                if let Some(k) = gone.idempotency_key {
                    st.keys.remove(&(gone.tenant_id, k));
                }
                if let Some(k) = gone.active_key {
                    let at = (gone.tenant_id, gone.kind, k);
                    if st.active_keys.get(&at) == Some(id) {
                        st.active_keys.remove(&at);
                    }
                }
            }
        }
        st.batches_purge(before);
        Ok(doomed.len() as u64)
    }

    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        let now = self.now();
        let mut st = self.lock();
        let item = st.tenant_item(tenant, id)?;
        // A dead letter may be cancelled (discarded); done and cancelled
        // items are past it.
        if item.status.is_final() && item.status != Status::Failed {
            return Err(Error::Conflict(format!(
                "item {id} is {} and cannot be cancelled",
                item.status
            )));
        }
        let before = item.clone();
        item.status = Status::Cancelled;
        clear_claim(item);
        item.updated_at = now;
        item.updated_by = actor;
        let out = item.clone();
        st.end_run(&before);
        st.audit.push(AuditEntry {
            tenant_id: tenant,
            item_id: id,
            action: "cancel".into(),
            actor,
            detail: None,
            at: now,
        });
        st.finished(id, now);
        self.flush_wakes(&mut st);
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
            // A run again from scratch: the old result goes, and the item
            // gives up its active key (an operator's retry is not an
            // enqueue that key could refuse).
            item.result = None;
            item.active_key = None;
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
        self.wake.counted(&lane);
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
            .filter(|i| f.group.is_none() || f.group == i.group)
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
        self.counts_where(|_| true)
    }

    async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        self.counts_where(|i| i.tenant_id == tenant)
    }

    async fn gauges(&self) -> Result<Gauges> {
        self.gauges_now()
    }
}

impl MemoryStore {
    /// Counts per lane, kind and status of the items `keep` keeps.
    fn counts_where(&self, keep: impl Fn(&Item) -> bool) -> Result<Vec<CountRow>> {
        let st = self.lock();
        let mut map: HashMap<(String, String, Status), i64> = HashMap::new();
        for i in st.items.values().filter(|i| keep(i)) {
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

    /// The health gauges.
    fn gauges_now(&self) -> Result<Gauges> {
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
}
