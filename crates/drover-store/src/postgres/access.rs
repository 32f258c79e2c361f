//! API tokens and idempotency markers on PostgreSQL. Tokens are a system
//! table (system role); markers are tenant data written under the runtime
//! role with the marker's tenant set, so RLS bounds them.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::{PgStore, secs};
use std::collections::{HashMap, HashSet};

use crate::access::{
    AccessStore, MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey, NewToken, TokenRow,
};
use drover_core::error::{Error, Result};

const TOKEN_INSERT: &str = include_str!("../../sql/postgres/token_insert.sql");
const TOKEN_BY_HASH: &str = include_str!("../../sql/postgres/token_by_hash.sql");
const TOKEN_LIST: &str = include_str!("../../sql/postgres/token_list.sql");
const TOKEN_REVOKE: &str = include_str!("../../sql/postgres/token_revoke.sql");
const MARKER_BEGIN: &str = include_str!("../../sql/postgres/marker_begin.sql");
const MARKER_GET: &str = include_str!("../../sql/postgres/marker_get.sql");
const MARKER_FINISH: &str = include_str!("../../sql/postgres/marker_finish.sql");
const MARKER_RELEASE: &str = include_str!("../../sql/postgres/marker_release.sql");
const MARKER_PURGE: &str = include_str!("../../sql/postgres/marker_purge.sql");
const MARKER_BEGIN_MANY: &str = include_str!("../../sql/postgres/marker_begin_many.sql");
const MARKER_GET_MANY: &str = include_str!("../../sql/postgres/marker_get_many.sql");
const MARKER_FINISH_MANY: &str = include_str!("../../sql/postgres/marker_finish_many.sql");
const MARKER_LOCK_MANY: &str = include_str!("../../sql/postgres/marker_lock_many.sql");

/// Indices of `inputs` grouped by tenant, the groups in order of first
/// appearance.
fn by_tenant<T>(inputs: &[T], tenant: impl Fn(&T) -> Uuid) -> Vec<(Uuid, Vec<usize>)> {
    let mut groups: Vec<(Uuid, Vec<usize>)> = Vec::new();
    for (i, x) in inputs.iter().enumerate() {
        let t = tenant(x);
        match groups.iter_mut().find(|(g, _)| *g == t) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((t, vec![i])),
        }
    }
    groups
}

/// Stores many answers on an open transaction; `at_first` says it is on
/// the first answer's tenant already.
pub(super) async fn finish_many_on(
    tx: &mut sqlx::PgConnection,
    answers: &[MarkerAnswer],
    at_first: bool,
) -> Result<()> {
    for (n, (tenant, idx)) in by_tenant(answers, |a| a.key.tenant_id)
        .into_iter()
        .enumerate()
    {
        if n > 0 || !at_first {
            super::switch_tenant(&mut *tx, tenant).await?;
        }
        // Unprepared, so it is planned with this batch's arrays: a generic
        // plan made while the markers table was small (a fresh installation)
        // keeps joining the batch against every marker of the tenant (a
        // bitmap scan per batch that grows with the table) until an ANALYZE
        // invalidates it.
        sqlx::query(MARKER_FINISH_MANY)
            .persistent(false)
            .bind(tenant)
            .bind(
                idx.iter()
                    .map(|&i| answers[i].key.principal)
                    .collect::<Vec<_>>(),
            )
            .bind(
                idx.iter()
                    .map(|&i| answers[i].key.route.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                idx.iter()
                    .map(|&i| answers[i].key.key.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                idx.iter()
                    .map(|&i| i32::from(answers[i].status))
                    .collect::<Vec<_>>(),
            )
            .bind(
                idx.iter()
                    .map(|&i| answers[i].body.clone())
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A marker's identity within one tenant.
type Scoped = (Uuid, String, String);

fn scoped(k: &MarkerKey) -> Scoped {
    (k.principal, k.route.clone(), k.key.clone())
}

fn token_row(r: &PgRow) -> Result<TokenRow> {
    Ok(TokenRow {
        id: r.try_get("id")?,
        hash: r.try_get("hash")?,
        role: r.try_get("role")?,
        scope_tenant: r.try_get("scope_tenant")?,
        enqueue: r.try_get("enqueue")?,
        label: r.try_get("label")?,
        created_at: r.try_get("created_at")?,
        revoked_at: r.try_get("revoked_at")?,
        work: r.try_get("work")?,
    })
}

#[async_trait]
impl AccessStore for PgStore {
    async fn token_insert(&self, t: &NewToken) -> Result<TokenRow> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(TOKEN_INSERT)
            .persistent(self.persistent)
            .bind(t.id)
            .bind(&t.hash)
            .bind(&t.role)
            .bind(t.scope_tenant)
            .bind(&t.enqueue)
            .bind(&t.label)
            .bind(&t.work)
            .fetch_one(&mut *tx)
            .await;
        let r = match r {
            Ok(r) => r,
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {
                return Err(Error::Conflict(format!("token {} exists", t.id)));
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        token_row(&r)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(TOKEN_BY_HASH)
            .persistent(self.persistent)
            .bind(hash)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        r.as_ref().map(token_row).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRow>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(TOKEN_LIST)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(token_row).collect()
    }

    async fn token_revoke(&self, id: Uuid) -> Result<bool> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(TOKEN_REVOKE)
            .persistent(self.persistent)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn marker_begin(
        &self,
        k: &MarkerKey,
        fingerprint: &str,
        retention: Duration,
        stale_after: Duration,
    ) -> Result<MarkerBegin> {
        let mut tx = self.begin_tenant(k.tenant_id).await?;
        // A concurrent begin on the same key waits here for the first
        // one's commit (a short transaction), then matches nothing.
        let started = sqlx::query(MARKER_BEGIN)
            .persistent(self.persistent)
            .bind(k.tenant_id)
            .bind(k.principal)
            .bind(&k.route)
            .bind(&k.key)
            .bind(fingerprint)
            .bind(secs(retention))
            .bind(secs(stale_after))
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        let out = if started {
            MarkerBegin::Started
        } else {
            let r = sqlx::query(MARKER_GET)
                .persistent(self.persistent)
                .bind(k.tenant_id)
                .bind(k.principal)
                .bind(&k.route)
                .bind(&k.key)
                .fetch_one(&mut *tx)
                .await?;
            let fp: String = r.try_get("fingerprint")?;
            let state: String = r.try_get("state")?;
            let status: Option<i32> = r.try_get("status")?;
            crate::access::classify(
                &fp,
                fingerprint,
                &state,
                status.and_then(|s| u16::try_from(s).ok()),
                r.try_get("body")?,
            )
        };
        tx.commit().await?;
        Ok(out)
    }

    async fn marker_finish(&self, k: &MarkerKey, status: u16, body: &str) -> Result<()> {
        let mut tx = self.begin_tenant(k.tenant_id).await?;
        sqlx::query(MARKER_FINISH)
            .persistent(self.persistent)
            .bind(k.tenant_id)
            .bind(k.principal)
            .bind(&k.route)
            .bind(&k.key)
            .bind(i32::from(status))
            .bind(body)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn marker_release(&self, k: &MarkerKey) -> Result<()> {
        let mut tx = self.begin_tenant(k.tenant_id).await?;
        sqlx::query(MARKER_RELEASE)
            .persistent(self.persistent)
            .bind(k.tenant_id)
            .bind(k.principal)
            .bind(&k.route)
            .bind(&k.key)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn marker_begin_many(
        &self,
        claims: &[MarkerClaim],
        retention: Duration,
        stale_after: Duration,
    ) -> Result<Vec<MarkerBegin>> {
        let Some(first) = claims.first() else {
            return Ok(Vec::new());
        };
        // Its own short transaction, committed before any request runs: a
        // request with one of these keys sees the marker in flight at once.
        // The claim commits without waiting for its WAL flush: it is
        // visible at once all the same, and it needs no durability of its
        // own. The request's item commit comes after it in the WAL, so
        // whatever of the request is durable has its claim durable too; a
        // claim lost in a crash belongs to a request that never answered
        // (its retry claims again), and a 409 given on it only asked for
        // a retry. Set with the BEGIN, in its round trip.
        let mut tx = self
            .begin_tenant_with(first.key.tenant_id, "SET LOCAL synchronous_commit = off")
            .await?;
        let out = begin_many_on(self, &mut tx, claims, retention, stale_after, false).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn marker_finish_many(&self, answers: &[MarkerAnswer]) -> Result<()> {
        let Some(first) = answers.first() else {
            return Ok(());
        };
        let mut tx = self.begin_tenant(first.key.tenant_id).await?;
        finish_many_on(&mut tx, answers, true).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn marker_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(MARKER_PURGE)
            .persistent(self.persistent)
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}

/// Claims many markers on an open transaction begun for `claims[0]`'s
/// tenant (left on the last group's tenant): each `Started`, or what the
/// marker already there says. With `lock`, a key another transaction holds
/// the advisory lock of answers `InFlight` (the one-transaction write of
/// `gathered::write`).
pub(super) async fn begin_many_on(
    store: &PgStore,
    tx: &mut sqlx::PgConnection,
    claims: &[MarkerClaim],
    retention: Duration,
    stale_after: Duration,
    lock: bool,
) -> Result<Vec<MarkerBegin>> {
    let mut out: Vec<Option<MarkerBegin>> = vec![None; claims.len()];
    for (n, (tenant, idx)) in by_tenant(claims, |c| c.key.tenant_id)
        .into_iter()
        .enumerate()
    {
        if n > 0 {
            super::switch_tenant(&mut *tx, tenant).await?;
        }
        // Claimed and answered in one transaction, a marker is never
        // seen in flight by another request: a second request with the
        // key would wait for the first's commit on the key's index
        // entry. A transaction-scoped advisory lock per key, tried and
        // never waited for, tells it apart instead: a key whose lock
        // another transaction holds is in flight (409). A hash
        // collision only answers a 409 the client retries.
        let busy: HashSet<Scoped> = if lock {
            lock_keys(store, &mut *tx, tenant, &idx, claims).await?
        } else {
            HashSet::new()
        };
        // One statement may not touch a row twice: the first copy of a
        // key is claimed, later copies are read back with the rest.
        let mut seen = HashSet::new();
        let (mut p, mut r, mut k, mut f) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for &i in &idx {
            let c = &claims[i];
            if busy.contains(&scoped(&c.key)) {
                out[i] = Some(MarkerBegin::InFlight);
                continue;
            }
            if seen.insert(scoped(&c.key)) {
                p.push(c.key.principal);
                r.push(c.key.route.clone());
                k.push(c.key.key.clone());
                f.push(c.fingerprint.clone());
            }
        }
        let rows = sqlx::query(MARKER_BEGIN_MANY)
            .persistent(store.persistent)
            .bind(tenant)
            .bind(p)
            .bind(r)
            .bind(k)
            .bind(f)
            .bind(secs(retention))
            .bind(secs(stale_after))
            .fetch_all(&mut *tx)
            .await?;
        let mut started = HashSet::with_capacity(rows.len());
        for row in &rows {
            started.insert((
                row.try_get::<Uuid, _>("principal_id")?,
                row.try_get::<String, _>("route")?,
                row.try_get::<String, _>("key")?,
            ));
        }
        let mut rest = Vec::new();
        for &i in &idx {
            if out[i].is_some() {
                continue;
            }
            if started.remove(&scoped(&claims[i].key)) {
                out[i] = Some(MarkerBegin::Started);
            } else {
                rest.push(i);
            }
        }
        if rest.is_empty() {
            continue;
        }
        answer_existing(store, &mut *tx, tenant, rest, claims, &mut out).await?;
    }
    Ok(out
        .into_iter()
        .map(|o| o.unwrap_or(MarkerBegin::InFlight))
        .collect())
}

/// Answers each claim of `rest` (one tenant's, none of them started) from
/// the marker already there: a replay, a mismatch or in flight.
async fn answer_existing(
    store: &PgStore,
    tx: &mut sqlx::PgConnection,
    tenant: Uuid,
    rest: Vec<usize>,
    claims: &[MarkerClaim],
    out: &mut [Option<MarkerBegin>],
) -> Result<()> {
    let rows = sqlx::query(MARKER_GET_MANY)
        .persistent(store.persistent)
        .bind(tenant)
        .bind(
            rest.iter()
                .map(|&i| claims[i].key.principal)
                .collect::<Vec<_>>(),
        )
        .bind(
            rest.iter()
                .map(|&i| claims[i].key.route.clone())
                .collect::<Vec<_>>(),
        )
        .bind(
            rest.iter()
                .map(|&i| claims[i].key.key.clone())
                .collect::<Vec<_>>(),
        )
        .fetch_all(&mut *tx)
        .await?;
    let mut found: HashMap<Scoped, (String, String, Option<i32>, Option<String>)> =
        HashMap::with_capacity(rows.len());
    for row in &rows {
        found.insert(
            (
                row.try_get("principal_id")?,
                row.try_get("route")?,
                row.try_get("key")?,
            ),
            (
                row.try_get("fingerprint")?,
                row.try_get("state")?,
                row.try_get("status")?,
                row.try_get("body")?,
            ),
        );
    }
    for i in rest {
        let c = &claims[i];
        out[i] = Some(match found.get(&scoped(&c.key)) {
            Some((fp, state, status, body)) => crate::access::classify(
                fp,
                &c.fingerprint,
                state,
                status.and_then(|s| u16::try_from(s).ok()),
                body.clone(),
            ),
            // Claimed by nobody and not there: only a concurrent
            // release between the two statements; the request may
            // retry, so it is told the key is busy.
            None => MarkerBegin::InFlight,
        });
    }
    Ok(())
}

/// Tries the advisory lock of each distinct key of `idx` (one tenant's
/// claims) for this transaction; returns the keys whose lock another
/// transaction holds.
async fn lock_keys(
    store: &PgStore,
    tx: &mut sqlx::PgConnection,
    tenant: Uuid,
    idx: &[usize],
    claims: &[MarkerClaim],
) -> Result<HashSet<Scoped>> {
    let mut seen = HashSet::new();
    let (mut p, mut r, mut k) = (Vec::new(), Vec::new(), Vec::new());
    for &i in idx {
        let c = &claims[i];
        if seen.insert(scoped(&c.key)) {
            p.push(c.key.principal);
            r.push(c.key.route.clone());
            k.push(c.key.key.clone());
        }
    }
    let rows = sqlx::query(MARKER_LOCK_MANY)
        .persistent(store.persistent)
        .bind(format!("{}:{tenant}", store.schema))
        .bind(p)
        .bind(r)
        .bind(k)
        .fetch_all(&mut *tx)
        .await?;
    let mut busy = HashSet::new();
    for row in &rows {
        busy.insert((
            row.try_get::<Uuid, _>("principal_id")?,
            row.try_get::<String, _>("route")?,
            row.try_get::<String, _>("key")?,
        ));
    }
    Ok(busy)
}
