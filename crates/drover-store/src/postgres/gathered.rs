//! The HTTP API's gathered write on PostgreSQL
//! ([`Store::item_insert_each_claimed`](crate::Store::item_insert_each_claimed)):
//! a batch's `Idempotency-Key` markers, its items and their answers in one
//! transaction, one commit. A key another batch is writing is told by that
//! batch's transaction-scoped advisory lock on it (`InFlight`, never a
//! wait), and a write that fails leaves no marker: the rollback takes the
//! claims with it.

use std::time::Duration;

use super::PgStore;
use crate::AnswerFn;
use crate::access::{Claimed, ClaimedPlan, MarkerClaim};
use drover_core::error::Result;
use drover_core::item::{Inserted, NewItem};

/// Claims, inserts and answers one gathered batch in one transaction.
pub(super) async fn write(
    store: &PgStore,
    claims: &[Option<MarkerClaim>],
    prepared: Vec<Result<NewItem>>,
    answer: &AnswerFn<'_>,
    retention: Duration,
    stale_after: Duration,
) -> Result<Vec<Claimed>> {
    let present: Vec<MarkerClaim> = claims.iter().flatten().cloned().collect();
    let tenant = present
        .first()
        .map(|c| c.key.tenant_id)
        .or_else(|| prepared.iter().flatten().map(|i| i.tenant_id).next());
    let Some(tenant) = tenant else {
        // Every input refused and none holds a key: nothing to write.
        return Ok(ClaimedPlan::new(claims, prepared, Vec::new(), answer).finish(Vec::new()));
    };
    // One transaction for the claims, the items and the answers: one
    // commit per batch, and a request's marker never outlives a write
    // that failed (the rollback takes both).
    let mut tx = store.begin_tenant(tenant).await?;
    let begun = if present.is_empty() {
        Vec::new()
    } else {
        super::access::begin_many_on(store, &mut tx, &present, retention, stale_after, true).await?
    };
    let plan = ClaimedPlan::new(claims, prepared, begun, answer);
    if plan.items.is_empty() && plan.known.is_empty() {
        // Every input settled by its marker: nothing was written.
        tx.commit().await?;
        return Ok(plan.finish(Vec::new()));
    }
    // Each group below sets its tenant unless the whole batch is of the
    // one the transaction began with (the usual case).
    let one_tenant = present.iter().all(|c| c.key.tenant_id == tenant)
        && plan.items.iter().all(|i| i.tenant_id == tenant);
    if let Some(first) = plan.items.first()
        && !one_tenant
    {
        super::switch_tenant(&mut tx, first.tenant_id).await?;
    }
    let out = super::items::insert_each_on(store, &mut tx, &plan.items).await?;
    let remap = |j: usize, r: &Result<Inserted>| answer(plan.at[j], r);
    let answers = crate::answers_of(&out, &plan.markers, &remap, &plan.known);
    if !answers.is_empty() {
        super::access::finish_many_on(&mut tx, &answers, one_tenant).await?;
    }
    tx.commit().await?;
    super::items::wake_landed(store, &out);
    Ok(plan.finish(out))
}
