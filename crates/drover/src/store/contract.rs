//! The contract suite: one set of cases every [`Store`] must pass, run
//! unchanged against PostgreSQL, SQLite and memory.
//!
//! A backend's test file calls [`contract_suite!`](crate::contract_suite)
//! with an async function that builds a fresh, migrated, empty store; the
//! macro expands to one `#[tokio::test]` per case, so a failure names the
//! rule it broke.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::store::{ManualClock, Store};

/// A fresh store for one case, and a way to let time pass.
pub struct Harness {
    /// The store under test: migrated and empty.
    pub store: Arc<dyn Store>,
    /// The store's clock when it can be moved (SQLite, memory); `None` means
    /// the store reads a real clock (PostgreSQL's `now()`), so time passes by
    /// sleeping.
    pub clock: Option<Arc<ManualClock>>,
    /// Runs after the case (drops the schema or file).
    pub cleanup: Option<Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>>,
}

impl Harness {
    /// Lets `d` pass on the store's clock.
    pub async fn pass(&self, d: Duration) {
        match &self.clock {
            Some(c) => c.advance(d),
            None => tokio::time::sleep(d).await,
        }
    }

    /// Runs the cleanup.
    pub async fn finish(mut self) {
        if let Some(f) = self.cleanup.take() {
            f().await;
        }
    }
}
