//! [`SweepStore`] in memory: the lease is a token and an expiry on the
//! injected clock, under the store's lock.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::MemoryStore;
use crate::SweepStore;
use drover_core::error::{Error, Result};
use drover_core::rules::to_chrono;

#[async_trait]
impl SweepStore for MemoryStore {
    async fn sweep_lease_take(&self, _holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        let now = self.now();
        let mut st = self.lock();
        if st.sweep_lease.is_some_and(|(_, until)| until > now) {
            return Ok(None);
        }
        let token = Uuid::new_v4();
        st.sweep_lease = Some((token, now + to_chrono(lease)));
        Ok(Some(token))
    }

    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        let now = self.now();
        let mut st = self.lock();
        match &mut st.sweep_lease {
            Some((t, until)) if *t == token && *until > now => {
                *until = now + to_chrono(lease);
                Ok(())
            }
            _ => Err(Error::Conflict("the sweep lease is no longer held".into())),
        }
    }

    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        let now = self.now();
        let mut st = self.lock();
        if st.sweep_lease.is_none_or(|(t, _)| t != token) {
            return Ok(false);
        }
        st.sweep_lease = None;
        if completed {
            st.sweep_last_pass = Some(now);
        }
        Ok(true)
    }

    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(self.lock().sweep_last_pass)
    }
}
