//! The completion that hands its freed slots to a limited claim, in one
//! call (migration 0045).
//!
//! A worker whose claims a limit holds back writes a run's completion and
//! then claims again; between the two round trips a binding limit's slot
//! stands idle. `complete_then_claim` writes the completions (each fenced
//! on its token and lease in the statement, as `complete_items`) and then
//! runs `claim_limited` in the same transaction: the claim's count of held
//! slots, its scope locks and its admission are the limited claim's own,
//! and it sees the slots the completions freed. It is used only where the
//! claim would be that one call (a limit applies, no rate does, the schema
//! has 0036, and the lane's pending work is one tenant's or fair share is
//! off for it); otherwise, or on a schema before 0045, the completions are
//! written and the claim (fair, where it shares) follows, as two calls.

use std::collections::HashSet;

use sqlx::Row;
use uuid::Uuid;

use super::limits::CallArgs;
use super::{PgStore, row};
use crate::limits::applies;
use crate::{ClaimParams, Completion, Handover};
use drover_core::error::Result;
use drover_core::item::Item;

const HANDOVER_CALL: &str = include_str!("../../sql/postgres/limit_handover_call.sql");
/// The handover behind the flow settings' generation (`claim_gen.rs`).
const HANDOVER_CALL_CHECKED: &str =
    include_str!("../../sql/postgres/limit_handover_call_checked.sql");

impl PgStore {
    /// Completes `done` and claims by `p`, in one call when it can (see the
    /// module docs), else as the two calls.
    pub(super) async fn complete_then_claim(
        &self,
        done: &[Completion],
        p: &ClaimParams,
    ) -> Result<Handover> {
        if let Some(h) = self.handover_call(done, p).await? {
            return Ok(h);
        }
        let landed = super::items::complete_many(self, done).await?;
        let claimed = super::items::claim(self, p).await;
        Ok(Handover { landed, claimed })
    }

    /// The one call, or `None` when it does not apply (nothing written).
    async fn handover_call(
        &self,
        done: &[Completion],
        p: &ClaimParams,
    ) -> Result<Option<Handover>> {
        let Some(tenant) = done.first().map(|c| c.claim.tenant_id) else {
            return Ok(None);
        };
        if p.limit == 0
            || done.iter().any(|c| c.claim.tenant_id != tenant)
            || self.limits.no_handover()
            || self.limits.steps_only()
        {
            return Ok(None);
        }
        let limits = self.limits_in_force().await?;
        let in_force = self.rates_in_force().await?;
        if crate::rates::applies(&in_force.rates, &p.lane, &p.kinds)
            || !applies(&limits, &p.lane, &p.kinds)
        {
            return Ok(None);
        }
        // A lane shared fairly between tenants: the handover's call claims
        // in priority then age order, so the completions and the fair
        // limited claim (`fair_limited.rs`) run as the two calls.
        // So does a lane shared by group (its groups share even one
        // tenant's starts).
        let fair = self.fair_cached().await?;
        if fair.by_group(&p.lane)
            || fair.on(&p.lane) && self.fair_tenants(&p.lane).await?.0.len() > 1
        {
            return Ok(None);
        }
        let args = CallArgs::of(&limits, &p.lane);
        let sql = match in_force.flow_gen {
            Some(_) => HANDOVER_CALL_CHECKED,
            None => HANDOVER_CALL,
        }
        .replace("{schema}", &self.schema);
        let query = sqlx::query(&sql)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(done.iter().map(|c| c.claim.id).collect::<Vec<_>>())
            .bind(done.iter().map(|c| c.claim.token).collect::<Vec<_>>())
            .bind(done.iter().map(|c| c.result.clone()).collect::<Vec<_>>());
        // A handover refills the slots its completions free, most often
        // with the next item of the group that just finished: a window of
        // two candidates per slot (not the claim's four plus 32) keeps the
        // walk past full groups' backlogs short. A short answer costs the
        // worker one ordinary claim, as before the handover.
        let want = p.limit.saturating_mul(2).saturating_add(2);
        let mut query = self.bind_limited(query, p, &args, want);
        if let Some(g) = in_force.flow_gen {
            query = query.bind(g);
        }
        let fetched = self.system_call(query).await?;
        let rows = match fetched {
            Ok(rows) => rows,
            // undefined_function: the schema predates 0045 (nothing ran).
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42883") => {
                self.limits.set_no_handover();
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        // The generation moved (another process changed a rate or a
        // closure): nothing ran; complete and claim apart, each checked.
        if let Some(g) = in_force.flow_gen
            && rows
                .first()
                .map(|r| r.try_get::<i64, _>("flow_gen"))
                .transpose()?
                != Some(g)
        {
            self.rates.clear();
            return Ok(None);
        }
        let mut ids: HashSet<Uuid> = HashSet::new();
        let mut items: Vec<Item> = Vec::with_capacity(rows.len());
        for r in &rows {
            if ids.is_empty() {
                ids = r.try_get::<Vec<Uuid>, _>("landed")?.into_iter().collect();
            }
            if r.try_get::<Option<Uuid>, _>("id")?.is_some() {
                items.push(row::item(r)?);
            }
        }
        items.sort_by(|a, b| {
            (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
        });
        let landed = done
            .iter()
            .map(|c| c.claim.id)
            .filter(|id| ids.contains(id))
            .collect();
        Ok(Some(Handover {
            landed,
            claimed: Ok(items),
        }))
    }
}
