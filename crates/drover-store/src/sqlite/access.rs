//! API tokens and idempotency markers on SQLite. Every marker statement
//! names its tenant; a begin runs under the one writer's `BEGIN
//! IMMEDIATE`, so concurrent begins on one key are serialised.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::access::{
    AccessStore, MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey, NewToken, TokenRow,
};
use drover_core::error::{Error, Result};
use drover_core::rules::to_chrono;

const TOKEN_INSERT: &str = include_str!("../../sql/sqlite/token_insert.sql");
const TOKEN_BY_HASH: &str = include_str!("../../sql/sqlite/token_by_hash.sql");
const TOKEN_LIST: &str = include_str!("../../sql/sqlite/token_list.sql");
const TOKEN_REVOKE: &str = include_str!("../../sql/sqlite/token_revoke.sql");
const MARKER_BEGIN: &str = include_str!("../../sql/sqlite/marker_begin.sql");
const MARKER_GET: &str = include_str!("../../sql/sqlite/marker_get.sql");
const MARKER_FINISH: &str = include_str!("../../sql/sqlite/marker_finish.sql");
const MARKER_RELEASE: &str = include_str!("../../sql/sqlite/marker_release.sql");
const MARKER_PURGE: &str = include_str!("../../sql/sqlite/marker_purge.sql");

/// Claims one marker on the writer's open transaction (see
/// [`AccessStore::marker_begin`]).
async fn begin_on(
    conn: &mut SqliteConnection,
    k: &MarkerKey,
    fingerprint: &str,
    now: chrono::DateTime<chrono::Utc>,
    retention: Duration,
    stale_after: Duration,
) -> Result<MarkerBegin> {
    let started = sqlx::query(MARKER_BEGIN)
        .bind(k.tenant_id)
        .bind(k.principal)
        .bind(&k.route)
        .bind(&k.key)
        .bind(fingerprint)
        .bind(to_micros(now))
        .bind(to_micros(now + to_chrono(retention)))
        .bind(to_micros(now - to_chrono(stale_after)))
        .fetch_optional(&mut *conn)
        .await?
        .is_some();
    if started {
        return Ok(MarkerBegin::Started);
    }
    let r = sqlx::query(MARKER_GET)
        .bind(k.tenant_id)
        .bind(k.principal)
        .bind(&k.route)
        .bind(&k.key)
        .fetch_one(&mut *conn)
        .await?;
    let fp: String = r.try_get("fingerprint")?;
    let state: String = r.try_get("state")?;
    let status: Option<i64> = r.try_get("status")?;
    Ok(crate::access::classify(
        &fp,
        fingerprint,
        &state,
        status.and_then(|s| u16::try_from(s).ok()),
        r.try_get("body")?,
    ))
}

/// Stores one answer on the writer's open transaction.
async fn finish_on(
    conn: &mut SqliteConnection,
    k: &MarkerKey,
    status: u16,
    body: &str,
) -> Result<()> {
    sqlx::query(MARKER_FINISH)
        .bind(k.tenant_id)
        .bind(k.principal)
        .bind(&k.route)
        .bind(&k.key)
        .bind(i64::from(status))
        .bind(body)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn token_row(r: &SqliteRow) -> Result<TokenRow> {
    let enqueue: String = r.try_get("enqueue")?;
    let revoked: Option<i64> = r.try_get("revoked_at")?;
    let work: String = r.try_get("work")?;
    Ok(TokenRow {
        id: r.try_get("id")?,
        hash: r.try_get("hash")?,
        role: r.try_get("role")?,
        scope_tenant: r.try_get("scope_tenant")?,
        enqueue: serde_json::from_str(&enqueue)
            .map_err(|e| Error::Config(format!("api_tokens.enqueue is not a JSON array: {e}")))?,
        label: r.try_get("label")?,
        created_at: from_micros(r.try_get("created_at")?)?,
        revoked_at: revoked.map(from_micros).transpose()?,
        work: serde_json::from_str(&work)
            .map_err(|e| Error::Config(format!("api_tokens.work is not a JSON array: {e}")))?,
    })
}

#[async_trait]
impl AccessStore for SqliteStore {
    async fn token_insert(&self, t: &NewToken) -> Result<TokenRow> {
        // SQLite has no arrays: the list is bound as JSON text. Not a check
        // of the argument (any list of strings encodes), so not lifted.
        let enqueue = serde_json::to_string(&t.enqueue)
            .map_err(|e| Error::invalid("enqueue", e.to_string()))?;
        let work =
            serde_json::to_string(&t.work).map_err(|e| Error::invalid("work", e.to_string()))?;
        let mut tx = self.begin().await?;
        let r = sqlx::query(TOKEN_INSERT)
            .bind(t.id)
            .bind(&t.hash)
            .bind(&t.role)
            .bind(t.scope_tenant)
            .bind(enqueue)
            .bind(&t.label)
            .bind(to_micros(self.now()))
            .bind(work)
            .fetch_one(&mut *tx)
            .await;
        let r = match r {
            Ok(r) => r,
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(Error::Conflict(format!("token {} exists", t.id)));
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        token_row(&r)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        let r = sqlx::query(TOKEN_BY_HASH)
            .bind(hash)
            .fetch_optional(&self.reader)
            .await?;
        r.as_ref().map(token_row).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRow>> {
        let rows = sqlx::query(TOKEN_LIST).fetch_all(&self.reader).await?;
        rows.iter().map(token_row).collect()
    }

    async fn token_revoke(&self, id: Uuid) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(TOKEN_REVOKE)
            .bind(id)
            .bind(to_micros(self.now()))
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
        let now = self.now();
        let mut tx = self.begin().await?;
        let out = begin_on(&mut tx, k, fingerprint, now, retention, stale_after).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn marker_begin_many(
        &self,
        claims: &[MarkerClaim],
        retention: Duration,
        stale_after: Duration,
    ) -> Result<Vec<MarkerBegin>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        // One writer transaction, committed before any request runs; a
        // later copy of a key meets the first one's row in flight.
        let mut tx = self.begin().await?;
        let mut out = Vec::with_capacity(claims.len());
        for c in claims {
            out.push(begin_on(&mut tx, &c.key, &c.fingerprint, now, retention, stale_after).await?);
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn marker_finish_many(&self, answers: &[MarkerAnswer]) -> Result<()> {
        if answers.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for a in answers {
            finish_on(&mut tx, &a.key, a.status, &a.body).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn marker_finish(&self, k: &MarkerKey, status: u16, body: &str) -> Result<()> {
        let mut tx = self.begin().await?;
        finish_on(&mut tx, k, status, body).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn marker_release(&self, k: &MarkerKey) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(MARKER_RELEASE)
            .bind(k.tenant_id)
            .bind(k.principal)
            .bind(&k.route)
            .bind(&k.key)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn marker_purge(&self, batch: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(MARKER_PURGE)
            .bind(to_micros(self.now()))
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
