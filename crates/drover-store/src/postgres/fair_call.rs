//! The fair claim in one call (PostgreSQL, migration 0057).
//!
//! # What this module owns
//!
//! [`PgStore::fair_call`]: when this process kept the lane's passes, the
//! first round is drawn here from them (the tenants, each with its pass
//! lifted to the lane's virtual time, its stride and its cap, as the
//! client-side claim draws it: [`round_caps`]) and sent to
//! `fair_claim_call`, which locks the lane's row, checks the version token
//! the passes were kept at, reads the round's candidates, claims the least
//! virtual starts and moves the passes, in one round trip with its commit.
//! The client-side claim (`fairness.rs`) was a transaction of four: its
//! p99 at 10,000 tenants was 3-4x a claim's without fair share
//! (`docs/flow-control.md`, "The fair claim in one call").
//!
//! # Invariants
//!
//! - The call claims only while the lane's row holds the token the passes
//!   were kept at, under the row's lock, and reads the candidates in a
//!   statement begun after the lock: the round is the one the client-side
//!   claim would have drawn and read under its own lock. Any other token
//!   (another process's claim, the purge) and nothing runs; the caller
//!   claims under its lock as before.
//! - The passes kept after the call are moved by exactly the starts the
//!   server gave ([`Passes::record_starts`] per tenant, from the pass sent
//!   for it), and kept at the token the call wrote; with nothing claimed
//!   nothing is written and the kept passes stay at their token.
//! - A claim the round could not fill while the lane's list names tenants
//!   the round did not read is finished by the caller under its lock
//!   (the client-side rounds), so the claim stays work-conserving.

use std::collections::BTreeMap;

use sqlx::Row;
use uuid::Uuid;

use super::claim_gen::Attempt;
use super::fair_rounds::round_caps;
use super::{PgStore, row, secs};
use crate::ClaimParams;
use crate::fairness::{FairSettings, Passes, Rounds, pass_version, stride};
use crate::rates::InForce;
use drover_core::error::Result;
use drover_core::item::Item;

const FAIR_CLAIM_CALL: &str = include_str!("../../sql/postgres/fair_claim_call.sql");

/// What the one call did.
enum Called {
    /// It ran: the items it claimed (maybe none), and whether the caller
    /// should claim the rest under its lock (the round fell short while
    /// the lane's list names tenants it did not read).
    Items(Vec<Item>, bool),
    /// Nothing ran: the flow settings' generation moved.
    Stale,
    /// Nothing ran: the lane's passes are not the ones kept here, or the
    /// schema has no such function; claim under the lock.
    Declined,
}

impl PgStore {
    /// The fair claim of `p` among `tenants` (see the module docs): in one
    /// call when this process kept the lane's passes (`fair_call.rs`),
    /// else (or for what that call could not fill) under the client's own
    /// lock.
    pub(super) async fn claim_fair_with(
        &self,
        p: &ClaimParams,
        in_force: &InForce,
        fair: &FairSettings,
        tenants: &[Uuid],
    ) -> Result<Attempt> {
        let alive: Vec<(Uuid, u32)> = tenants.iter().map(|t| (*t, fair.weight(*t))).collect();
        if fair.by_group(&p.lane) || self.fair_passes.no_call() {
            return self.claim_fair_locked(p, in_force, fair, alive).await;
        }
        let Some(kept) = self.fair_passes.latest(&p.lane) else {
            return self.claim_fair_locked(p, in_force, fair, alive).await;
        };
        match self
            .fair_call(p, in_force.flow_gen, fair, &alive, kept)
            .await?
        {
            Called::Stale => Ok(Attempt::Stale),
            Called::Declined => self.claim_fair_locked(p, in_force, fair, alive).await,
            Called::Items(items, false) => Ok(Attempt::Items(items)),
            Called::Items(mut items, true) => {
                let rest = ClaimParams {
                    limit: p
                        .limit
                        .saturating_sub(u32::try_from(items.len()).unwrap_or(u32::MAX)),
                    ..p.clone()
                };
                // The call's items are claimed and committed: they go back
                // to the caller whatever the rest does (an error here must
                // not leave them claimed until their lease passes).
                match self.claim_fair_locked(&rest, in_force, fair, alive).await {
                    Ok(Attempt::Items(more)) => items.extend(more),
                    // The generation moved after the call: what it claimed
                    // stands (it was checked), the rest waits for the next.
                    Ok(Attempt::Stale) => {}
                    Err(e) => {
                        tracing::debug!(target: "drover::postgres", error = %e, "fair claim: the rest under the lock failed; the call's items stand");
                    }
                }
                Ok(Attempt::Items(items))
            }
        }
    }

    /// How many fair claims this store made in one call (for tests).
    #[doc(hidden)]
    pub fn fair_calls_made(&self) -> u64 {
        self.fair_passes.calls()
    }

    /// The fair claim of `p` among `alive` in one call, drawn from the
    /// passes `kept` (a version token and the passes kept at it); `fgen`
    /// the flow settings' generation the caller read (see the module
    /// docs).
    async fn fair_call(
        &self,
        p: &ClaimParams,
        fgen: Option<i64>,
        fair: &FairSettings,
        alive: &[(Uuid, u32)],
        kept: (i64, Passes),
    ) -> Result<Called> {
        let (kept_version, mut passes) = kept;
        let mut rounds = Rounds::new(alive.to_vec());
        let fresh = round_caps(&mut rounds, &passes, p.limit);
        if fresh.is_empty() {
            return Ok(Called::Declined);
        }
        // Per tenant of the round: its pass, stride and cap.
        let drawn: Vec<(Uuid, i64, i64, i64)> = fresh
            .iter()
            .map(|(t, _, cap)| (*t, passes.pass(*t), stride(fair.weight(*t)), *cap))
            .collect();
        let version = pass_version();
        let sql = FAIR_CLAIM_CALL.replace("{schema}", &self.schema);
        let query = sqlx::query(&sql)
            .persistent(self.persistent)
            .bind(&p.lane)
            .bind(&p.kinds)
            .bind(&p.worker_id)
            .bind(secs(p.lease))
            .bind(i64::from(p.limit))
            .bind(kept_version)
            .bind(version)
            .bind(fgen)
            .bind(drawn.iter().map(|d| d.0).collect::<Vec<_>>())
            .bind(drawn.iter().map(|d| d.1).collect::<Vec<_>>())
            .bind(drawn.iter().map(|d| d.2).collect::<Vec<_>>())
            .bind(drawn.iter().map(|d| d.3).collect::<Vec<_>>());
        let rows = match self.system_call(query).await? {
            Ok(rows) => rows,
            // undefined_function: the schema predates 0057 (nothing ran).
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42883") => {
                self.fair_passes.set_no_call();
                return Ok(Called::Declined);
            }
            Err(e) => return Err(e.into()),
        };
        match rows
            .first()
            .map(|r| r.try_get::<String, _>("outcome"))
            .transpose()?
            .as_deref()
        {
            Some("moved") => return Ok(Called::Declined),
            Some("stale") => return Ok(Called::Stale),
            _ => {}
        }
        self.fair_passes.count_call();
        let mut items = rows.iter().map(row::item).collect::<Result<Vec<_>>>()?;
        items.sort_by(|a, b| {
            (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
        });
        if !items.is_empty() {
            let mut started: BTreeMap<Uuid, u64> = BTreeMap::new();
            for i in &items {
                *started.entry(i.tenant_id).or_default() += 1;
            }
            for (t, pass, stride, _) in &drawn {
                if let Some(n) = started.get(t) {
                    passes.record_starts(*t, *pass, *stride, *n);
                }
            }
            self.fair_passes.put(&p.lane, version, &passes);
        }
        let short = items.len() < p.limit as usize && alive.len() > drawn.len();
        Ok(Called::Items(items, short))
    }
}
