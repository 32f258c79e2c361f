//! `Queue::why_waiting` names what holds a pending item back, on the
//! memory, SQLite and PostgreSQL stores: a full limit with the claims that
//! hold it, a future run_at, a paused lane, no live worker for the lane;
//! and nothing once the item is claimable.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{Principal, Queue, WaitReason};
use drover::store::limits::LimitScope;
use drover::store::{ClaimParams, Store, WorkerRow};
use drover::{NewItem, Status};
use serde_json::json;
use uuid::Uuid;

fn claim(lane: &str) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease: Duration::from_secs(600),
        limit: 10,
    }
}

async fn reasons_name_what_holds_an_item_back(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let system = Principal::system();
    let kind = |k: &str| LimitScope::Kind(k.into());
    q.limit_set(&system, &kind("export"), 1).await.unwrap();
    let first = q
        .enqueue_item(&system, NewItem::new("export", json!({})))
        .await
        .unwrap()
        .item;
    let second = q
        .enqueue_item(&system, NewItem::new("export", json!({})))
        .await
        .unwrap()
        .item;
    let claimed = store.item_claim(&claim("default")).await.unwrap();
    assert_eq!(claimed.len(), 1, "the limit admits one");
    assert_eq!(claimed[0].id, first.id);

    let waiting = q.get(Uuid::nil(), second.id).await.unwrap();
    let why = q.why_waiting(&waiting).await.unwrap();
    let full = why
        .iter()
        .find_map(|w| match w {
            WaitReason::LimitFull {
                scope,
                concurrency,
                held_by,
            } => Some((scope.clone(), *concurrency, held_by.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a full limit: {why:?}"));
    assert_eq!((full.0.as_str(), full.1), ("kind export", 1));
    assert_eq!(full.2.len(), 1);
    assert_eq!(full.2[0].id, first.id);
    assert_eq!(full.2[0].worker.as_deref(), Some("w1"));
    assert!(
        why.iter()
            .any(|w| matches!(w, WaitReason::NoWorker { lane } if lane == "default")),
        "{why:?}"
    );

    // A live worker on the lane, the lane paused, an item for later.
    let now = store.db_now().await.unwrap();
    store
        .worker_beat(&WorkerRow {
            id: "w-live".into(),
            host: "h".into(),
            pid: 1,
            lanes: vec!["default".into()],
            capacity: 1,
            started_at: now,
            last_beat_at: now,
            state: "running".into(),
            beat_interval_ms: 60_000,
        })
        .await
        .unwrap();
    q.lane_pause(&system, "default").await.unwrap();
    let later = q
        .enqueue_item(
            &system,
            NewItem::new("mail", json!({})).with_available_at(now + chrono::Duration::hours(1)),
        )
        .await
        .unwrap()
        .item;
    let why = q.why_waiting(&later).await.unwrap();
    assert!(matches!(why[0], WaitReason::RunAt { .. }), "{why:?}");
    assert!(
        why.iter()
            .any(|w| matches!(w, WaitReason::LanePaused { .. })),
        "{why:?}"
    );
    assert!(
        !why.iter().any(|w| matches!(
            w,
            WaitReason::NoWorker { .. } | WaitReason::LimitFull { .. }
        )),
        "a live worker, no limit on mail: {why:?}"
    );

    // Resumed, the slot freed: nothing holds the export back.
    q.lane_resume(&system, "default").await.unwrap();
    store
        .item_complete(&drover::ClaimRef::of(&claimed[0]).unwrap())
        .await
        .unwrap();
    let why = q.why_waiting(&waiting).await.unwrap();
    assert!(why.is_empty(), "{why:?}");
    let done = q.get(Uuid::nil(), first.id).await.unwrap();
    assert_eq!(done.status, Status::Done);
    assert!(matches!(
        q.why_waiting(&done).await.unwrap()[0],
        WaitReason::NotPending { .. }
    ));
}

#[tokio::test]
async fn memory_reasons() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    reasons_name_what_holds_an_item_back(store).await;
}

#[tokio::test]
async fn sqlite_reasons() {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = std::env::temp_dir().join(format!("drover-why-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&dir.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    reasons_name_what_holds_an_item_back(Arc::new(store)).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", dir.display()));
    }
}

#[tokio::test]
async fn postgres_reasons() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    reasons_name_what_holds_an_item_back(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}
