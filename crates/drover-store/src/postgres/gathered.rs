//! The HTTP API's gathered write on PostgreSQL
//! ([`Store::item_insert_each_claimed`](crate::Store::item_insert_each_claimed)):
//! a batch's `Idempotency-Key` markers, its items and their answers in one
//! transaction, one commit. A key another batch is writing is told by that
//! batch's transaction-scoped advisory lock on it (`InFlight`, never a
//! wait), and a write that fails or is dropped leaves no marker: the
//! rollback takes the claims with it.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{Postgres, Transaction};

use super::PgStore;
use crate::access::{Claimed, MarkerClaim};
use crate::gathered::{Answer, ClaimedPlan, Gathered, Written};
use drover_core::error::Result;
use drover_core::item::NewItem;

/// Claims and inserts one gathered batch in one transaction, left open
/// for the answers.
pub(super) async fn write<'a>(
    store: &'a PgStore,
    claims: &[Option<MarkerClaim>],
    prepared: Vec<Result<NewItem>>,
    retention: Duration,
    stale_after: Duration,
) -> Result<Box<dyn Gathered + 'a>> {
    let present: Vec<MarkerClaim> = claims.iter().flatten().cloned().collect();
    let tenant = present
        .first()
        .map(|c| c.key.tenant_id)
        .or_else(|| prepared.iter().flatten().map(|i| i.tenant_id).next());
    let Some(tenant) = tenant else {
        // Every input refused and none holds a key: nothing to write.
        let written = ClaimedPlan::new(claims, prepared, Vec::new()).finish(Vec::new());
        return Ok(Box::new(Open {
            store,
            tx: None,
            written,
            one_tenant: true,
        }));
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
    let plan = ClaimedPlan::new(claims, prepared, begun);
    if plan.writes_nothing() {
        // Every input settled by its marker: nothing was written.
        tx.commit().await?;
        return Ok(Box::new(Open {
            store,
            tx: None,
            written: plan.finish(Vec::new()),
            one_tenant: true,
        }));
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
    Ok(Box::new(Open {
        store,
        tx: Some(tx),
        written: plan.finish(out),
        one_tenant,
    }))
}

/// A batch whose transaction is open, waiting for its answers.
struct Open<'a> {
    store: &'a PgStore,
    /// `None` once nothing is left to write (every input settled).
    tx: Option<Transaction<'static, Postgres>>,
    written: Written,
    one_tenant: bool,
}

#[async_trait]
impl Gathered for Open<'_> {
    fn outcomes(&self) -> &[Claimed] {
        &self.written.outcomes
    }

    async fn commit(self: Box<Self>, answers: &[Option<Answer>]) -> Result<Vec<Claimed>> {
        let Open {
            store,
            tx,
            written,
            one_tenant,
        } = *self;
        let (stored, release) = written.answers(answers);
        if let Some(mut tx) = tx {
            if !stored.is_empty() {
                super::access::finish_many_on(&mut tx, &stored, one_tenant).await?;
            }
            tx.commit().await?;
            let inserted = written.outcomes.iter().filter_map(|c| match c {
                Claimed::Written(Ok(ins)) => Some(ins),
                _ => None,
            });
            super::items::wake_written(store, inserted);
        }
        crate::gathered::release_unanswered(store, &release).await;
        Ok(written.outcomes)
    }
}
