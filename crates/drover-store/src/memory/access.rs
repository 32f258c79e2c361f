//! API tokens and idempotency markers of the memory backend, under the
//! store's one lock (so a begin is one atomic step, as a statement is).

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::MemoryStore;
use crate::access::{AccessStore, MarkerBegin, MarkerKey, NewToken, TokenRow};
use drover_core::error::{Error, Result};
use drover_core::rules::to_chrono;

/// A marker as the memory backend keeps it.
#[derive(Debug, Clone)]
pub(super) struct Marker {
    fingerprint: String,
    done: Option<(u16, String)>,
    created_at: chrono::DateTime<chrono::Utc>,
    expires_at: chrono::DateTime<chrono::Utc>,
}

#[async_trait]
impl AccessStore for MemoryStore {
    async fn token_insert(&self, t: &NewToken) -> Result<TokenRow> {
        let now = self.now();
        let mut st = self.lock();
        if st.tokens.iter().any(|r| r.id == t.id || r.hash == t.hash) {
            return Err(Error::Conflict(format!("token {} exists", t.id)));
        }
        let row = TokenRow {
            id: t.id,
            hash: t.hash.clone(),
            role: t.role.clone(),
            scope_tenant: t.scope_tenant,
            enqueue: t.enqueue.clone(),
            label: t.label.clone(),
            created_at: now,
            revoked_at: None,
            work: t.work.clone(),
        };
        st.tokens.push(row.clone());
        Ok(row)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        Ok(self
            .lock()
            .tokens
            .iter()
            .find(|r| r.hash == hash && r.revoked_at.is_none())
            .cloned())
    }

    async fn token_list(&self) -> Result<Vec<TokenRow>> {
        Ok(self.lock().tokens.clone())
    }

    async fn token_revoke(&self, id: Uuid) -> Result<bool> {
        let now = self.now();
        let mut st = self.lock();
        match st
            .tokens
            .iter_mut()
            .find(|r| r.id == id && r.revoked_at.is_none())
        {
            Some(r) => {
                r.revoked_at = Some(now);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn marker_begin(
        &self,
        k: &MarkerKey,
        fingerprint: &str,
        retention: Duration,
        stale_after: Duration,
    ) -> Result<MarkerBegin> {
        let now = self.now();
        let mut st = self.lock();
        if let Some(m) = st.markers.get(k) {
            let expired = m.expires_at <= now;
            let stale = m.done.is_none() && m.created_at <= now - to_chrono(stale_after);
            if !expired && !stale {
                let (state, status, body) = match &m.done {
                    Some((s, b)) => ("done", Some(*s), Some(b.clone())),
                    None => ("in_flight", None, None),
                };
                return Ok(crate::access::classify(
                    &m.fingerprint,
                    fingerprint,
                    state,
                    status,
                    body,
                ));
            }
        }
        st.markers.insert(
            k.clone(),
            Marker {
                fingerprint: fingerprint.to_owned(),
                done: None,
                created_at: now,
                expires_at: now + to_chrono(retention),
            },
        );
        Ok(MarkerBegin::Started)
    }

    async fn marker_finish(&self, k: &MarkerKey, status: u16, body: &str) -> Result<()> {
        let mut st = self.lock();
        if let Some(m) = st.markers.get_mut(k)
            && m.done.is_none()
        {
            m.done = Some((status, body.to_owned()));
        }
        Ok(())
    }

    async fn marker_release(&self, k: &MarkerKey) -> Result<()> {
        let mut st = self.lock();
        if st.markers.get(k).is_some_and(|m| m.done.is_none()) {
            st.markers.remove(k);
        }
        Ok(())
    }

    async fn marker_purge(&self, batch: u32) -> Result<u64> {
        let now = self.now();
        let mut st = self.lock();
        let expired: Vec<MarkerKey> = st
            .markers
            .iter()
            .filter(|(_, m)| m.expires_at <= now)
            .map(|(k, _)| k.clone())
            .take(batch as usize)
            .collect();
        for k in &expired {
            st.markers.remove(k);
        }
        Ok(expired.len() as u64)
    }
}
