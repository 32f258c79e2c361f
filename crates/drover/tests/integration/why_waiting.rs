//! `Queue::why_waiting` names what holds a pending item back, on the
//! memory, SQLite and PostgreSQL stores: a full limit with the claims that
//! hold it, a future run_at, a paused lane, no live worker for the lane or
//! none of the lane's that handles the item's kind, fair share serving
//! other tenants first; and nothing once the item is claimable.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover::queue::{Principal, Queue, WaitReason};
use drover::store::limits::LimitScope;
use drover::store::{ClaimParams, Store, WorkerRow, WorkerStore};
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
            .any(|w| matches!(w, WaitReason::NoWorker { lane, kind: None } if lane == "default")),
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
            kinds: vec![],
            version: String::new(),
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

/// A per-group rate with no start to give names itself, its rate and when
/// it next allows one; the claims it held back are counted for
/// `drover_rate_limited_total{scope}`; another group starts.
async fn a_rate_names_its_next_start(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let system = Principal::system();
    let per_group = LimitScope::KindPerGroup("paced".into());
    let hour = Duration::from_secs(3_600);
    q.rate_set(
        &system,
        &per_group,
        drover::store::rates::Rate::per(1, hour),
    )
    .await
    .unwrap();
    let put = |g: &'static str| {
        let q = q.clone();
        async move {
            q.enqueue_item(
                &Principal::system(),
                NewItem::new("paced", json!({}))
                    .with_group(g)
                    .with_lane("paced"),
            )
            .await
            .unwrap()
            .item
        }
    };
    put("g1").await;
    put("g2").await;
    let held = put("g1").await;
    let before = drover::store::rates::rate_limited_count("kind paced per group");
    let claimed = store.item_claim(&claim("paced")).await.unwrap();
    assert_eq!(claimed.len(), 2, "one start per group: {claimed:?}");
    assert!(claimed.iter().all(|i| i.id != held.id));
    let now = store.db_now().await.unwrap();
    let why = q
        .why_waiting(&q.get(Uuid::nil(), held.id).await.unwrap())
        .await
        .unwrap();
    let (scope, rate, next) = why
        .iter()
        .find_map(|w| match w {
            WaitReason::RateLimited {
                scope,
                rate,
                next_start,
            } => Some((scope.clone(), rate.clone(), *next_start)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a rate holds it back: {why:?}"));
    assert_eq!(
        (scope.as_str(), rate.as_str()),
        ("kind paced per group", "1/1h")
    );
    assert!(
        next > now + chrono::Duration::minutes(59) && next <= now + chrono::Duration::hours(1),
        "{next} against {now}"
    );
    let text = why
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    assert!(
        text.contains("rate 1/1h on kind paced per group: next start allowed at"),
        "{text}"
    );
    assert_eq!(
        why.iter()
            .find(|w| w.code() == "rate_limited")
            .map(WaitReason::code),
        Some("rate_limited")
    );
    // The next claim finds g1's cell ahead: counted.
    assert!(store.item_claim(&claim("paced")).await.unwrap().is_empty());
    assert!(
        drover::store::rates::rate_limited_count("kind paced per group") > before,
        "the held-back claims are counted"
    );
    // The other group's item is not rate-limited once claimed: nothing of
    // another group waits on g1's cell.
    q.rate_clear(&system, &per_group).await.unwrap();
    let why = q
        .why_waiting(&q.get(Uuid::nil(), held.id).await.unwrap())
        .await
        .unwrap();
    assert!(!why.iter().any(|w| w.code() == "rate_limited"), "{why:?}");
}

fn beat_row(id: &str, lanes: &[&str], kinds: &[&str], state: &str) -> WorkerRow {
    let now = chrono::Utc::now();
    WorkerRow {
        id: id.into(),
        host: "h".into(),
        pid: 1,
        lanes: lanes.iter().map(|l| (*l).to_owned()).collect(),
        capacity: 1,
        started_at: now,
        last_beat_at: now,
        state: state.into(),
        beat_interval_ms: 60_000,
        kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
        version: String::new(),
    }
}

/// The `no_worker` reasons of one item, each with its words.
async fn no_worker(q: &Queue, id: Uuid) -> Vec<(WaitReason, String)> {
    let item = q.get(Uuid::nil(), id).await.unwrap();
    q.why_waiting(&item)
        .await
        .unwrap()
        .into_iter()
        .filter(|w| w.code() == "no_worker")
        .map(|w| {
            let words = w.to_string();
            (w, words)
        })
        .collect()
}

/// Live workers drain the item's lane but none handles its kind: the
/// reason is `no_worker` naming the kind, until one that handles it beats
/// (a worker of another lane, or one offline, does not count).
async fn no_worker_of_the_lane_handles_the_kind(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let item = q
        .enqueue_item(
            &Principal::system(),
            NewItem::new("report.build", json!({})).with_lane("reports"),
        )
        .await
        .unwrap()
        .item;
    let lane_only = WaitReason::NoWorker {
        lane: "reports".into(),
        kind: None,
    };
    let why = no_worker(&q, item.id).await;
    assert_eq!(
        why,
        vec![(lane_only, "no live worker drains lane reports".into())]
    );

    let beat = |w: WorkerRow| {
        let store = store.clone();
        async move { store.worker_beat(&w).await.unwrap() }
    };
    beat(beat_row("w-mail", &["reports"], &["mail.send"], "running")).await;
    beat(beat_row(
        "w-other",
        &["other"],
        &["report.build"],
        "running",
    ))
    .await;
    beat(beat_row(
        "w-off",
        &["reports"],
        &["report.build"],
        "offline",
    ))
    .await;
    let of_kind = (
        WaitReason::NoWorker {
            lane: "reports".into(),
            kind: Some("report.build".into()),
        },
        "no live worker of lane reports handles kind report.build".to_owned(),
    );
    assert_eq!(no_worker(&q, item.id).await, vec![of_kind.clone()]);
    let json = serde_json::to_value(&of_kind.0).unwrap();
    assert_eq!(
        json,
        json!({"reason": "no_worker", "lane": "reports", "kind": "report.build"})
    );

    beat(beat_row(
        "w-off",
        &["reports"],
        &["report.build"],
        "running",
    ))
    .await;
    assert_eq!(
        no_worker(&q, item.id).await,
        vec![],
        "a live worker handles it"
    );
    // Draining still serves what it holds: it is live.
    beat(beat_row(
        "w-off",
        &["reports"],
        &["report.build"],
        "draining",
    ))
    .await;
    assert_eq!(no_worker(&q, item.id).await, vec![]);
}

/// Fair share: after tenant A took the lane's first start, A's next item
/// waits with `fair_share` while B has due work; B's does not.
async fn fair_share_names_the_tenant_served_later(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let (a, b) = (Uuid::from_u128(0xA), Uuid::from_u128(0xB));
    let mut items = Vec::new();
    for t in [a, a, b, b] {
        let it = NewItem::new("share", json!({}))
            .with_lane("shared")
            .with_tenant(t);
        items.push(store.item_insert(&it).await.unwrap().item);
    }
    let mut one = claim("shared");
    one.limit = 1;
    let got = store.item_claim(&one).await.unwrap();
    assert_eq!(got.len(), 1);
    let first = got[0].tenant_id;
    let other = if first == a { b } else { a };
    let pending = |t: Uuid| items.iter().find(|i| i.tenant_id == t && i.id != got[0].id);
    let held = q.get(first, pending(first).unwrap().id).await.unwrap();
    let why = q.why_waiting(&held).await.unwrap();
    let fair = why
        .iter()
        .find(|w| w.code() == "fair_share")
        .unwrap_or_else(|| panic!("fair share holds it back: {why:?}"));
    assert!(
        fair.to_string()
            .contains(&format!("tenant {first} (weight 1) has started 1")),
        "{fair}"
    );
    let next = q.get(other, pending(other).unwrap().id).await.unwrap();
    let why = q.why_waiting(&next).await.unwrap();
    assert!(!why.iter().any(|w| w.code() == "fair_share"), "{why:?}");
}

/// Fair share by group: after group X of tenant A took two starts and Y
/// one, X's next item waits with `fair_share_group` naming Y; Y's does
/// not.
async fn fair_share_group_names_the_sibling_served_first(store: Arc<dyn Store>) {
    let q = Queue::new(store.clone());
    let a = Uuid::from_u128(0xA);
    store
        .fair_lane_set("grouped", true, true, Uuid::nil())
        .await
        .unwrap();
    let mut items = Vec::new();
    for g in ["x", "x", "x", "y", "y"] {
        let it = NewItem::new("share", json!({}))
            .with_lane("grouped")
            .with_tenant(a)
            .with_group(g);
        items.push(store.item_insert(&it).await.unwrap().item);
    }
    let mut three = claim("grouped");
    three.limit = 3;
    let got = store.item_claim(&three).await.unwrap();
    let xs = got
        .iter()
        .filter(|i| i.group.as_deref() == Some("x"))
        .count();
    assert_eq!((got.len(), xs), (3, 2), "x, y, x: {got:?}");
    let left = |g: &str| {
        items
            .iter()
            .find(|i| i.group.as_deref() == Some(g) && !got.iter().any(|c| c.id == i.id))
            .unwrap()
            .id
    };
    let held = q.get(a, left("x")).await.unwrap();
    let why = q.why_waiting(&held).await.unwrap();
    let w = why
        .iter()
        .find(|w| w.code() == "fair_share_group")
        .unwrap_or_else(|| panic!("group y is served first: {why:?}"));
    assert!(
        w.to_string().contains("group x of tenant") && w.to_string().contains("group y of"),
        "{w}"
    );
    let next = q.get(a, left("y")).await.unwrap();
    let why = q.why_waiting(&next).await.unwrap();
    assert!(
        !why.iter().any(|w| w.code() == "fair_share_group"),
        "{why:?}"
    );
}

#[tokio::test]
async fn memory_reasons() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    // First: on SQLite and PostgreSQL a claim a limit may apply to keeps
    // priority then age order, and the next case sets one.
    fair_share_names_the_tenant_served_later(store.clone()).await;
    fair_share_group_names_the_sibling_served_first(store.clone()).await;
    reasons_name_what_holds_an_item_back(store.clone()).await;
    no_worker_of_the_lane_handles_the_kind(store.clone()).await;
    a_rate_names_its_next_start(store).await;
}

#[tokio::test]
async fn sqlite_reasons() {
    use drover::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = std::env::temp_dir().join(format!("drover-why-{}.db", Uuid::new_v4()));
    let store = SqliteStore::open(&dir.to_string_lossy(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    // First: on SQLite and PostgreSQL a claim a limit may apply to keeps
    // priority then age order, and the next case sets one.
    fair_share_names_the_tenant_served_later(store.clone()).await;
    fair_share_group_names_the_sibling_served_first(store.clone()).await;
    reasons_name_what_holds_an_item_back(store.clone()).await;
    no_worker_of_the_lane_handles_the_kind(store.clone()).await;
    a_rate_names_its_next_start(store).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", dir.display()));
    }
}

#[tokio::test]
async fn postgres_reasons() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    // First: on SQLite and PostgreSQL a claim a limit may apply to keeps
    // priority then age order, and the next case sets one.
    fair_share_names_the_tenant_served_later(store.clone()).await;
    fair_share_group_names_the_sibling_served_first(store.clone()).await;
    reasons_name_what_holds_an_item_back(store.clone()).await;
    no_worker_of_the_lane_handles_the_kind(store.clone()).await;
    a_rate_names_its_next_start(store).await;
    drover::testing::pg_drop_schema(&drover::testing::pg_owner_url().await, &schema).await;
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Mail {}

impl drover::queue::Kind for Mail {
    const NAME: &'static str = "mail.send";
}

struct MailHandler;

impl drover::worker::Handler for MailHandler {
    type Job = Mail;
    const STRATEGY: drover::worker::Strategy = drover::worker::Strategy {
        idempotency: "test handler: does nothing",
        retry: "queue default",
        checkpoint: "none: one step",
        recovery: "swept after the lease",
    };
    async fn handle(&self, _cx: &drover::queue::JobContext, _job: Mail) -> drover::worker::Outcome {
        Ok(drover::worker::Done::Completed)
    }
}

/// A real worker beats its registry's kinds; an item of another kind in
/// its lane waits with `no_worker` naming that kind.
#[tokio::test]
async fn memory_worker_beats_its_registrys_kinds() {
    let store = Arc::new(drover::store::memory::MemoryStore::new());
    let q = Queue::new(store.clone());
    let w = drover::Worker::builder(q.clone())
        .settings(drover::worker::WorkerSettings {
            capacity: 1,
            lanes: vec!["default".into()],
            metrics_addr: None,
            heartbeat_cron: None,
            ..drover::worker::WorkerSettings::default()
        })
        .handler(MailHandler)
        .without_sweep()
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    // Synchronise on the row: the first beat is published at start (the
    // bound only keeps a broken heartbeat from hanging the run).
    let row = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(r) = store.worker_list().await.unwrap().into_iter().next() {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the worker's row is published");
    assert_eq!(row.kinds, vec!["mail.send".to_owned()]);
    assert_eq!(row.lanes, vec!["default".to_owned()]);
    let export = q
        .enqueue_item(&Principal::system(), NewItem::new("export", json!({})))
        .await
        .unwrap()
        .item;
    assert_eq!(
        no_worker(&q, export.id).await,
        vec![(
            WaitReason::NoWorker {
                lane: "default".into(),
                kind: Some("export".into()),
            },
            "no live worker of lane default handles kind export".to_owned()
        )]
    );
    w.shutdown().await;
}
