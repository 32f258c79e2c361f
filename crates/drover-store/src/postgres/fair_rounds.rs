//! A fair claim's rounds of reads on PostgreSQL: which tenants a round
//! reads and how many candidates for each ([`round_caps`]), the read of a
//! lane shared by tenant ([`FAIR_CANDIDATES`]), its rows as lists
//! ([`candidate_lists`]), and the end of a round ([`settle_round`]).
//!
//! Shared by the locked claim (`fairness.rs`) and the first round read
//! with the lock (`fair_first.rs`), so both draw and read alike: a round
//! read either way is the same round.

use std::collections::{BTreeMap, HashSet};

use sqlx::Row;
use uuid::Uuid;

use crate::fairness::{Passes, Rounds, TenantWork};
use drover_core::error::Result;

/// Per tenant, its work for the share.
pub(super) type Works<C> = BTreeMap<Uuid, TenantWork<C>>;

/// The lane's row locked as `fairness.rs`'s `FAIR_LOCK` locks it, as a CTE `l` for
/// statements that read more under the same lock.
pub(super) const FAIR_LOCK_CTE: &str = "
WITH l AS (
    INSERT INTO fair_passes (lane, tenant_id, pass) VALUES ($1, 'ffffffff-ffff-ffff-ffff-ffffffffffff', 0)
    ON CONFLICT (lane, tenant_id) DO UPDATE SET pass = fair_passes.pass
    RETURNING pass, started)";
/// The flow settings' generation, as a column of the statements that lock
/// the lane's row.
pub(super) const FLOW_GEN_COLUMN: &str = "(SELECT gen FROM flow_generation LIMIT 1) AS gen";
/// Each tenant $2[k]'s next due items of lane $1 in claim order, at most
/// $3[k], of the kinds $4.
pub(super) const FAIR_CANDIDATES: &str = "
SELECT c.id, c.tenant_id, c.priority, c.available_at
FROM unnest($2::uuid[], $3::bigint[]) AS q(tenant_id, cap)
CROSS JOIN LATERAL (
    SELECT i.id, i.tenant_id, i.priority, i.available_at FROM items i
    WHERE i.lane = $1 AND i.status = 'pending' AND i.tenant_id = q.tenant_id
      AND i.available_at <= now()
      AND (cardinality($4::text[]) = 0 OR i.kind = ANY($4))
    ORDER BY i.priority, i.available_at
    LIMIT q.cap) c";

/// A candidate: its claim order key and id.
pub(super) type Candidate = ((i16, chrono::DateTime<chrono::Utc>), Uuid);

/// As on SQLite: candidates read per start a tenant's quota gives it.
pub(super) const PER_START: u32 = 2;
/// And one more per tenant.
pub(super) const EXTRA: u32 = 1;

/// A round's tenants (drawn by `rounds` from `passes` for a claim of
/// `limit`), each with its quota and the candidates to read for it.
pub(super) fn round_caps(
    rounds: &mut Rounds,
    passes: &Passes,
    limit: u32,
) -> Vec<(Uuid, u32, i64)> {
    rounds
        .next(passes, limit)
        .iter()
        .map(|(t, q)| {
            let cap = q.saturating_mul(PER_START).saturating_add(EXTRA).min(limit);
            (*t, *q, i64::from(cap))
        })
        .collect()
}

/// Runs a round's read `sql` ([`FAIR_CANDIDATES`], or a statement that
/// reads them beside the lane's lock) for the tenants `fresh` of `p`'s
/// lane: $1 lane, $2 tenants, $3 caps, $4 kinds. Answers the tenants read
/// and the rows.
pub(super) async fn read_round(
    tx: &mut sqlx::PgConnection,
    sql: &str,
    persistent: bool,
    p: &crate::ClaimParams,
    fresh: &[(Uuid, u32, i64)],
) -> Result<(Vec<Uuid>, Vec<sqlx::postgres::PgRow>)> {
    let ts: Vec<Uuid> = fresh.iter().map(|f| f.0).collect();
    let caps: Vec<i64> = fresh.iter().map(|f| f.2).collect();
    let rows = sqlx::query(sql)
        .persistent(persistent)
        .bind(&p.lane)
        .bind(&ts)
        .bind(&caps)
        .bind(&p.kinds)
        .fetch_all(tx)
        .await?;
    Ok((ts, rows))
}

/// The candidate rows of a read for tenants `ts` as their lists (a row
/// without an id, as `fair_candidates` answers for nobody, is skipped).
pub(super) fn candidate_lists(
    ts: &[Uuid],
    rows: &[sqlx::postgres::PgRow],
) -> Result<Works<Candidate>> {
    let mut got: BTreeMap<Uuid, Vec<Candidate>> = ts.iter().map(|t| (*t, Vec::new())).collect();
    for r in rows {
        let Some(id) = r.try_get::<Option<Uuid>, _>("id")? else {
            continue;
        };
        let key: (i16, chrono::DateTime<chrono::Utc>) =
            (r.try_get("priority")?, r.try_get("available_at")?);
        if let Some(l) = got.get_mut(&r.try_get::<Uuid, _>("tenant_id")?) {
            l.push((key, id));
        }
    }
    Ok(got
        .into_iter()
        .map(|(t, l)| (t, TenantWork::Items(l)))
        .collect())
}

/// After a round's read: drops the tenants of `fresh` that came back with
/// nothing; whether another round is wanted.
pub(super) fn settle_round<C>(
    rounds: &mut Rounds,
    fresh: &[(Uuid, u32, i64)],
    lists: &Works<C>,
) -> bool {
    let empty: HashSet<Uuid> = fresh
        .iter()
        .map(|f| f.0)
        .filter(|t| lists.get(t).is_none_or(TenantWork::is_empty))
        .collect();
    rounds.settle(&empty)
}
