//! Closing a group from a handler, through the worker runtime, on the
//! memory, SQLite and PostgreSQL stores: a handler that meets a saturated
//! far side closes its group until a time and hands its item back without
//! spending an attempt; the group's other items wait too, other groups
//! run; `Queue::why_waiting` names the closure and the item that made it;
//! an operator's reopen lets the group run at once.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use drover::item::Status;
use drover::queue::{JobContext, Kind, Principal, Queue, WaitReason};
use drover::store::Store;
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Call {
    customer: String,
}

impl Kind for Call {
    const NAME: &'static str = "call_customer";

    fn group(&self) -> Option<String> {
        Some(self.customer.clone())
    }
}

/// Answers 429 for customer `busy` while `saturated` holds: closes the
/// group for an hour and hands the item back (items the worker claimed
/// before the close still run, and close it again: a close only moves a
/// closure later).
struct Caller {
    saturated: AtomicBool,
    closed_by: std::sync::Mutex<Option<Uuid>>,
    runs_busy: AtomicU32,
}

struct Calls(Arc<Caller>);

impl Handler for Calls {
    type Job = Call;
    const STRATEGY: Strategy = Strategy {
        idempotency: "a test call has no effect",
        retry: "default",
        checkpoint: "none",
        recovery: "runs again",
    };

    async fn handle(&self, cx: &JobContext, job: Call) -> Outcome {
        if job.customer != "busy" {
            return Ok(Done::Completed);
        }
        let me = &self.0;
        me.runs_busy.fetch_add(1, Ordering::SeqCst);
        if me.saturated.load(Ordering::SeqCst) {
            // Retry-After: 3600.
            let until = chrono::Utc::now() + chrono::Duration::hours(1);
            cx.close_group_until(until).await.map_err(JobError::retry)?;
            *me.closed_by.lock().unwrap() = Some(cx.id());
            return Err(JobError::until_reopened());
        }
        Ok(Done::Completed)
    }
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..600 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn handler_closes_its_group(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let busy: Vec<Uuid> = {
        let mut ids = Vec::new();
        for _ in 0..3 {
            let c = Call {
                customer: "busy".into(),
            };
            ids.push(q.enqueue(c).await.unwrap().item.id);
        }
        ids
    };
    let mut calm = Vec::new();
    for _ in 0..5 {
        let c = Call {
            customer: "calm".into(),
        };
        calm.push(q.enqueue(c).await.unwrap().item.id);
    }
    let caller = Arc::new(Caller {
        saturated: AtomicBool::new(true),
        closed_by: std::sync::Mutex::new(None),
        runs_busy: AtomicU32::new(0),
    });
    let running = Worker::builder(q.clone())
        .settings(drover::worker::WorkerSettings {
            capacity: 1,
            poll_interval: Duration::from_millis(100),
            metrics_addr: None,
            heartbeat_cron: None,
            ..Default::default()
        })
        .handler(Calls(caller.clone()))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    // The calm group drains; the busy one was closed by its first run.
    wait_for("the calm group to finish", async || {
        let mut done = true;
        for id in &calm {
            done &= q.get(Uuid::nil(), *id).await.unwrap().status == Status::Done;
        }
        done && caller.closed_by.lock().unwrap().is_some()
    })
    .await;
    let closer = caller.closed_by.lock().unwrap().expect("closed");
    wait_for("the closer to be handed back", async || {
        q.get(Uuid::nil(), closer).await.unwrap().status == Status::Pending
    })
    .await;
    // A calm item enqueued after the close runs; the busy group, enqueued
    // before it, still has not run again.
    let later = q
        .enqueue(Call {
            customer: "calm".into(),
        })
        .await
        .unwrap()
        .item
        .id;
    wait_for("a later calm item to finish", async || {
        q.get(Uuid::nil(), later).await.unwrap().status == Status::Done
    })
    .await;
    // Every claim since began after the close: the busy group stays out.
    let ran = caller.runs_busy.load(Ordering::SeqCst);
    let again = q
        .enqueue(Call {
            customer: "calm".into(),
        })
        .await
        .unwrap()
        .item
        .id;
    wait_for("another calm item to finish", async || {
        q.get(Uuid::nil(), again).await.unwrap().status == Status::Done
    })
    .await;
    assert_eq!(caller.runs_busy.load(Ordering::SeqCst), ran, "closed");
    let closer = caller.closed_by.lock().unwrap().expect("closed");
    for id in &busy {
        let item = q.get(Uuid::nil(), *id).await.unwrap();
        assert_eq!(item.status, Status::Pending, "{item:?}");
        assert_eq!(item.attempts, 0, "no attempt spent: {item:?}");
        let why = q.why_waiting(&item).await.unwrap();
        let closed = why
            .iter()
            .find_map(|w| match w {
                WaitReason::GroupClosed { group, by_item, .. } => Some((group.clone(), *by_item)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the closure: {why:?}"));
        assert_eq!(closed, (Some("busy".to_owned()), Some(closer)));
        let said = why
            .iter()
            .find(|w| w.code() == "group_closed")
            .unwrap()
            .to_string();
        assert!(
            said.starts_with("group busy closed until ")
                && said.ends_with(&format!("by item {closer}")),
            "{said}"
        );
    }
    let listed = q.closures().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].closed_by_item, Some(closer));
    // The far side recovers and the operator reopens: the group runs now,
    // not in an hour.
    caller.saturated.store(false, Ordering::SeqCst);
    assert!(
        q.reopen(
            &Principal::system(),
            "call_customer",
            Uuid::nil(),
            Some("busy")
        )
        .await
        .unwrap()
    );
    wait_for("the busy group to finish", async || {
        let mut done = true;
        for id in &busy {
            done &= q.get(Uuid::nil(), *id).await.unwrap().status == Status::Done;
        }
        done
    })
    .await;
    running.shutdown().await;
    let item = q.get(Uuid::nil(), closer).await.unwrap();
    assert_eq!(item.attempts, 0, "handing back spent no attempt: {item:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_handler_closes_its_group() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    handler_closes_its_group(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_handler_closes_its_group() {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let path = std::env::temp_dir().join(format!("drover-closed-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&path.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    handler_closes_its_group(Arc::new(store)).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_handler_closes_its_group() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    handler_closes_its_group(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}
