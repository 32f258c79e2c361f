//! The claim's check of the flow settings' generation (migration 0046) on
//! PostgreSQL: what makes a closure (or a rate) that another process
//! committed hold back every claim that begins after it, with no cache
//! lag.
//!
//! Each process keeps the rates and closures in force with the generation
//! it read before them ([`InForce`]). Every claim carries that generation
//! into the database: the one-call claims (`claim_items`,
//! `claim_limited`) read the generation's row in the same statement and
//! call the claim only while it still equals the caller's
//! (`item_claim_checked.sql`: a one-time gate, so the function is not
//! run at all otherwise); the step-by-step claim reads it first in its
//! transaction. A claim that finds it moved claims nothing; the caller
//! forgets its cache, reads the settings again and claims anew (at most
//! [`STALE_RETRIES`] times). Invariant: no item is claimed under settings
//! older than the last change committed before the claim's statement (or
//! transaction) began. On a schema before 0046 the generation is `None`
//! and the claims are the plain statements.

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{PgStore, row, secs};
use crate::ClaimParams;
use crate::rates::{InForce, STALE_RETRIES};
use drover_core::error::Result;
use drover_core::item::Item;

/// The one-call claim statements with the schema spliced in (validated).
#[derive(Debug)]
pub(super) struct ClaimSql {
    /// `claim_items`, unchecked (a schema before migration 0046).
    pub(super) plain: String,
    /// `claim_items` behind the generation's gate.
    pub(super) checked: String,
    /// `claim_limited`, unchecked.
    pub(super) limited: String,
    /// `claim_limited` behind the generation's gate.
    pub(super) limited_checked: String,
}

impl ClaimSql {
    pub(super) fn new(schema: &str) -> ClaimSql {
        let s = |q: &str| q.replace("{schema}", schema);
        ClaimSql {
            plain: s(super::sql::ITEM_CLAIM),
            checked: s(include_str!("../../sql/postgres/item_claim_checked.sql")),
            limited: s(include_str!("../../sql/postgres/limit_claim_call.sql")),
            limited_checked: s(include_str!(
                "../../sql/postgres/limit_claim_call_checked.sql"
            )),
        }
    }
}

/// What one attempt of a claim came to.
pub(super) enum Attempt {
    /// The items claimed (maybe none).
    Items(Vec<Item>),
    /// The generation moved since the caller read its settings: nothing
    /// was claimed.
    Stale,
}

/// The items of a checked claim's rows (`flow_gen` on every row, the
/// item's columns NULL on the one row of a claim that took none), or
/// [`Attempt::Stale`] when the generation is not `fgen` (no row at all: the
/// generation's row is gone, read again).
pub(super) fn checked_items(rows: &[PgRow], fgen: i64) -> Result<Attempt> {
    let Some(first) = rows.first() else {
        return Ok(Attempt::Stale);
    };
    if first.try_get::<i64, _>("flow_gen")? != fgen {
        return Ok(Attempt::Stale);
    }
    let mut items = Vec::with_capacity(rows.len());
    for r in rows {
        if r.try_get::<Option<uuid::Uuid>, _>("id")?.is_some() {
            items.push(row::item(r)?);
        }
    }
    Ok(Attempt::Items(items))
}

/// Claims available items across tenants (system role), in priority then
/// `available_at` order, under the settings of the latest generation.
pub(super) async fn claim(store: &PgStore, p: &ClaimParams) -> Result<Vec<Item>> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    for _ in 0..STALE_RETRIES {
        let in_force = store.rates_in_force().await?;
        let attempt = match store.claim_limited(p, &in_force).await? {
            Some(a) => a,
            None => match store.claim_fair(p, &in_force).await? {
                Some(a) => a,
                None => unlimited(store, p, &in_force).await?,
            },
        };
        match attempt {
            Attempt::Items(mut items) => {
                // RETURNING has no order; hand items out in the order they
                // were picked.
                items.sort_by(|a, b| {
                    (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
                });
                return Ok(items);
            }
            Attempt::Stale => store.rates.clear(),
        }
    }
    tracing::debug!(target: "drover::postgres", lane = %p.lane,
        "claim: the flow settings kept changing; nothing claimed this time");
    Ok(Vec::new())
}

/// The claim no limit or rate applies to: one autocommit statement into
/// `claim_items` (the function runs as the system role), behind the
/// generation's gate. Behind a transaction pooler, inside BEGIN/COMMIT
/// (see `pooler`).
async fn unlimited(store: &PgStore, p: &ClaimParams, in_force: &InForce) -> Result<Attempt> {
    let statement = match in_force.flow_gen {
        Some(_) => &store.claim_sql.checked,
        None => &store.claim_sql.plain,
    };
    let mut query = sqlx::query(statement)
        .persistent(store.persistent)
        .bind(&p.lane)
        .bind(&p.kinds)
        .bind(&p.worker_id)
        .bind(secs(p.lease))
        .bind(i64::from(p.limit));
    if let Some(g) = in_force.flow_gen {
        query = query.bind(g);
    }
    let rows = if store.persistent {
        query.fetch_all(&store.system_pool).await?
    } else {
        let mut tx = super::super::begin::begin(&store.system_pool, "BEGIN").await?;
        let rows = query.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows
    };
    match in_force.flow_gen {
        Some(g) => checked_items(&rows, g),
        None => Ok(Attempt::Items(
            rows.iter().map(row::item).collect::<Result<Vec<_>>>()?,
        )),
    }
}
