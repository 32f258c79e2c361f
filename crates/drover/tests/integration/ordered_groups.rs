//! Ordered groups through the worker runtime, on the memory, SQLite and
//! PostgreSQL stores: a kind declaring `ORDERED` runs each group's items
//! one at a time in enqueue order, with a worker of capacity 4 and its
//! prefetch; `Queue::why_waiting` names the earlier item a later one waits
//! behind.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue, WaitReason};
use drover::store::limits::LimitScope;
use drover::store::{ClaimParams, Store};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct Step {
    customer: u32,
    n: u32,
}

impl Kind for Step {
    const NAME: &'static str = "ordered_step";
    const ORDERED: bool = true;

    fn group(&self) -> Option<String> {
        Some(format!("customer:{}", self.customer))
    }
}

/// Per customer: the steps in the order they started, and how many ran at
/// once at most.
#[derive(Default)]
struct Seen {
    started: Mutex<HashMap<u32, Vec<u32>>>,
    running: Mutex<HashMap<u32, (u32, u32)>>,
}

struct Stepper(Arc<Seen>);

impl Handler for Stepper {
    type Job = Step;
    const STRATEGY: Strategy = Strategy {
        idempotency: "a test step records its start",
        retry: "default",
        checkpoint: "none",
        recovery: "runs again",
    };

    async fn handle(&self, _cx: &JobContext, job: Step) -> Outcome {
        {
            let mut r = self.0.running.lock().unwrap();
            let e = r.entry(job.customer).or_default();
            e.0 += 1;
            e.1 = e.1.max(e.0);
        }
        self.0
            .started
            .lock()
            .unwrap()
            .entry(job.customer)
            .or_default()
            .push(job.n);
        tokio::task::yield_now().await;
        self.0
            .running
            .lock()
            .unwrap()
            .get_mut(&job.customer)
            .unwrap()
            .0 -= 1;
        Ok(Done::Completed)
    }
}

const CUSTOMERS: u32 = 6;
const STEPS: u32 = 10;

async fn groups_run_in_enqueue_order(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    // Later steps carry a better priority: the order must not follow it.
    for n in 0..STEPS {
        for c in 0..CUSTOMERS {
            q.enqueue(Step { customer: c, n })
                .priority(i16::try_from(STEPS - n).unwrap())
                .await
                .unwrap();
        }
    }
    let seen = Arc::new(Seen::default());
    let running = Worker::builder(q.clone())
        .capacity(4)
        .metrics_addr(None)
        .handler(Stepper(seen.clone()))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    loop {
        let open: i64 = q
            .counts_lane("default")
            .await
            .unwrap()
            .iter()
            .filter(|r| !r.status.is_final())
            .map(|r| r.count)
            .sum();
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.shutdown().await;
    let started = seen.started.lock().unwrap().clone();
    for c in 0..CUSTOMERS {
        assert_eq!(
            started.get(&c).cloned().unwrap_or_default(),
            (0..STEPS).collect::<Vec<_>>(),
            "customer {c} in enqueue order"
        );
    }
    let running = seen.running.lock().unwrap().clone();
    for (c, (_, most)) in &running {
        assert_eq!(*most, 1, "customer {c} one at a time");
    }
    let limits = q.limits().await.unwrap();
    let ordered = limits
        .iter()
        .find(|u| u.setting.scope == LimitScope::KindPerGroup("ordered_step".into()))
        .expect("the code's ordered limit is in force");
    assert!(ordered.setting.ordered && ordered.setting.concurrency == 1);

    // Why a later step waits: the earlier one of its group, by id.
    let first = q.enqueue(Step { customer: 99, n: 0 }).await.unwrap();
    let second = q.enqueue(Step { customer: 99, n: 1 }).await.unwrap();
    let claimed = store
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![],
            worker_id: "w1".into(),
            lease: Duration::from_secs(600),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, first.item.id);
    let waiting = q.get(Uuid::nil(), second.item.id).await.unwrap();
    let why = q.why_waiting(&waiting).await.unwrap();
    let earlier = why
        .iter()
        .find_map(|w| match w {
            WaitReason::EarlierInGroup {
                group,
                item,
                status,
            } => Some((group.clone(), *item, status.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an earlier item: {why:?}"));
    assert_eq!(
        earlier,
        (
            "customer:99".to_owned(),
            first.item.id,
            "claimed".to_owned()
        )
    );
    let shown = why
        .iter()
        .find(|w| w.code() == "earlier_in_group")
        .unwrap()
        .to_string();
    assert!(shown.contains(&first.item.id.to_string()), "{shown}");
    // The operator's view of the limit says it is ordered.
    let set = q
        .limit_set(
            &Principal::system(),
            &LimitScope::Kind("ordered_step".into()),
            drover::store::limits::LimitSpec::ordered(Default::default()),
        )
        .await;
    assert!(set.is_err(), "only a per-group limit is ordered: {set:?}");
}

/// A migrated SQLite store on a fresh file, and the file's path.
async fn sqlite_file() -> (Arc<dyn Store>, std::path::PathBuf) {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let path = std::env::temp_dir().join(format!("drover-ordered-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&path.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (Arc::new(store), path)
}

/// Removes a SQLite file with its WAL and shared-memory files.
fn remove_sqlite_file(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_groups_run_in_enqueue_order() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    groups_run_in_enqueue_order(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_groups_run_in_enqueue_order() {
    let (store, path) = sqlite_file().await;
    groups_run_in_enqueue_order(store).await;
    remove_sqlite_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_groups_run_in_enqueue_order() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    groups_run_in_enqueue_order(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}

/// A group held back by its ordered limit runs its next item as soon as the
/// previous one's run ends, not at the next poll (an hour here): the worker
/// claims again from a lane whose short claim a limit held back, and
/// `ClaimBatch::limited` says which short claims those are;
/// `ClaimBatch::serial` says a limit applies to a claim, full or short (the
/// worker keeps one such claim of a lane in flight).
async fn held_back_groups_move_on_when_a_slot_frees(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    // A short claim no limit touches: the lane is empty, nothing held back.
    let empty = q
        .claim("default", &[], "w0", Duration::from_secs(60), 4)
        .await
        .unwrap();
    assert!(empty.items.is_empty() && !empty.limited, "{empty:?}");
    assert!(
        !empty.serial,
        "no limit applies to the lane: claims may overlap"
    );
    for n in 0..STEPS {
        q.enqueue(Step { customer: 7, n }).await.unwrap();
    }
    let seen = Arc::new(Seen::default());
    let running = Worker::builder(q.clone())
        .settings(drover::worker::WorkerSettings {
            capacity: 4,
            poll_interval: Duration::from_secs(3600),
            metrics_addr: None,
            heartbeat_cron: None,
            ..Default::default()
        })
        .handler(Stepper(seen.clone()))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while seen.started.lock().unwrap().get(&7).map_or(0, Vec::len) < STEPS as usize {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every step ran without waiting for the poll");
    running.shutdown().await;
    assert_eq!(
        seen.started.lock().unwrap()[&7],
        (0..STEPS).collect::<Vec<_>>()
    );
    // A short claim under the ordered limit (the code's, now stored): held
    // back, so worth claiming again once a slot frees.
    q.enqueue(Step { customer: 8, n: 0 }).await.unwrap();
    q.enqueue(Step { customer: 8, n: 1 }).await.unwrap();
    let first = q
        .claim("default", &[], "w1", Duration::from_secs(60), 4)
        .await
        .unwrap();
    assert_eq!(first.items.len(), 1);
    assert!(first.limited, "a limit applies to the short claim");
    assert!(
        first.serial,
        "a limit applies: the worker keeps one claim of the lane in flight"
    );
    // A full claim under the limit is serial too: one item asked, one taken.
    q.enqueue(Step { customer: 9, n: 0 }).await.unwrap();
    let full = q
        .claim("default", &[], "w1", Duration::from_secs(60), 1)
        .await
        .unwrap();
    assert_eq!(full.items.len(), 1);
    assert!(full.serial && !full.limited, "{full:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_held_back_groups_move_on_when_a_slot_frees() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    held_back_groups_move_on_when_a_slot_frees(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_held_back_groups_move_on_when_a_slot_frees() {
    let (store, path) = sqlite_file().await;
    held_back_groups_move_on_when_a_slot_frees(store).await;
    remove_sqlite_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_held_back_groups_move_on_when_a_slot_frees() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    held_back_groups_move_on_when_a_slot_frees(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}
