//! Helpers shared by the SQLite test files: a fresh database file per test
//! on a `ManualClock`, deleted when the test's `Db` drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover::item::NewItem;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{ClaimParams, ClaimRef, FailParams, ItemStore, ManualClock, Store};
use serde_json::json;
use uuid::Uuid;

pub const LEASE: Duration = Duration::from_secs(30);

pub struct Db {
    pub store: SqliteStore,
    pub clock: Arc<ManualClock>,
    pub path: PathBuf,
}

impl Drop for Db {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn temp_path() -> PathBuf {
    std::env::temp_dir().join(format!("drover-sqlite-{}.db", Uuid::new_v4()))
}

pub async fn db() -> Db {
    let path = temp_path();
    let clock = Arc::new(ManualClock::new());
    let opts = SqliteOptions {
        clock: clock.clone(),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(path.to_str().unwrap(), opts)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    Db { store, clock, path }
}

pub fn item(kind: &str) -> NewItem {
    NewItem::new(kind, json!({"n": 1}))
}

pub fn claim_params(lane: &str, limit: u32) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease: LEASE,
        limit,
    }
}

pub fn fail_params(fatal: bool) -> FailParams {
    FailParams {
        error: "boom".into(),
        retry_delay: Duration::from_secs(10),
        fatal,
    }
}

pub async fn claim_one(db: &Db) -> ClaimRef {
    let got = db
        .store
        .item_claim(&claim_params("default", 1))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "expected one claimable item");
    ClaimRef::of(&got[0]).unwrap()
}

pub trait NowForTest {
    fn now_for_test(&self) -> chrono::DateTime<chrono::Utc>;
}

impl NowForTest for ManualClock {
    fn now_for_test(&self) -> chrono::DateTime<chrono::Utc> {
        drover::store::Clock::now(self)
    }
}
