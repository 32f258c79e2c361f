//! API tokens and idempotency markers on PostgreSQL. Tokens are a system
//! table (system role); markers are tenant data written under the runtime
//! role with the marker's tenant set, so RLS bounds them.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::{PgStore, secs};
use crate::access::{AccessStore, MarkerBegin, MarkerKey, NewToken, TokenRow};
use crate::error::{Error, Result};

const TOKEN_INSERT: &str = include_str!("../../../sql/postgres/token_insert.sql");
const TOKEN_BY_HASH: &str = include_str!("../../../sql/postgres/token_by_hash.sql");
const TOKEN_LIST: &str = include_str!("../../../sql/postgres/token_list.sql");
const TOKEN_REVOKE: &str = include_str!("../../../sql/postgres/token_revoke.sql");
const MARKER_BEGIN: &str = include_str!("../../../sql/postgres/marker_begin.sql");
const MARKER_GET: &str = include_str!("../../../sql/postgres/marker_get.sql");
const MARKER_FINISH: &str = include_str!("../../../sql/postgres/marker_finish.sql");
const MARKER_RELEASE: &str = include_str!("../../../sql/postgres/marker_release.sql");
const MARKER_PURGE: &str = include_str!("../../../sql/postgres/marker_purge.sql");

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
