//! The sync reconciler over a 10,000-change source, killed mid-batch 10
//! times, on every backend and under every conflict strategy: after each
//! kill the checkpoint is never ahead of the applied records (nor the
//! records ahead of it), and once it resumes from its checkpoint and
//! drains, the local state is the source's for every record not changed
//! locally, and each locally changed record is settled as the strategy
//! says (`park_for_review` leaves those records listed with the source's
//! latest change).
//!
//! A kill is the abort of the task running the reconciler's loop, right
//! after the source handed over a batch (synchronised on the source's own
//! pull counter), after a varying number of scheduler yields, so kills land
//! before the batch's transaction, inside it, or while it commits. A
//! process kill is the same event for the database: the transaction never
//! commits. Memory has no transaction to cut (a batch is one critical
//! section with no await inside), so there a kill lands between batches;
//! it runs for the strategies and the resume.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use drover::queue::Queue;
use drover::reconcile::{
    Change, ConflictStrategy, LocalPut, Reconciler, ReconcilerConfig, ReconcilerStrategy,
    RecordFilter, Source, SourceBatch, SourceError, SyncRecord,
};
use drover::store::Store;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const CHANGES: usize = 10_000;
const KEYS: usize = 7_000;
const KILLS: usize = 10;
const BATCH: u32 = 400;
const NAME: &str = "crm";
/// Every 50th key is changed locally before the run.
const EDIT_EVERY: usize = 50;
/// A local version above every source version (the local edit is newer).
const NEWER: i64 = 1_000_000;

/// A source of `CHANGES` changes in order; the cursor is the index after
/// the last change handed over.
struct ListSource {
    changes: Vec<Change>,
    pulls: AtomicU64,
    pulled: tokio::sync::Notify,
}

#[async_trait]
impl Source for ListSource {
    async fn pull(
        &self,
        _tenant: Uuid,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<SourceBatch, SourceError> {
        let from: usize = match cursor {
            Some(c) => c
                .parse()
                .map_err(|_| SourceError(format!("bad cursor {c}")))?,
            None => 0,
        };
        let to = (from + limit as usize).min(self.changes.len());
        let batch = SourceBatch {
            changes: self.changes[from..to].to_vec(),
            cursor: (to > from).then(|| to.to_string()),
        };
        self.pulls.fetch_add(1, Ordering::SeqCst);
        self.pulled.notify_waiters();
        Ok(batch)
    }
}

fn key(i: usize) -> String {
    format!("k{i:05}")
}

/// Change `i` touches key `(i * 7919) % KEYS`, at version `i + 1`, so many
/// keys change more than once and versions grow per key.
fn source() -> Arc<ListSource> {
    let changes = (0..CHANGES)
        .map(|i| Change {
            key: key((i * 7919) % KEYS),
            version: i as i64 + 1,
            data: json!({"v": i + 1}),
            deleted: false,
        })
        .collect();
    Arc::new(ListSource {
        changes,
        pulls: AtomicU64::new(0),
        pulled: tokio::sync::Notify::new(),
    })
}

/// The locally edited keys, each with its local version: odd ones newer
/// than the source, even ones older.
fn edits() -> BTreeMap<String, i64> {
    (0..KEYS)
        .step_by(EDIT_EVERY)
        .enumerate()
        .map(|(n, k)| (key(k), if n % 2 == 1 { NEWER } else { 0 }))
        .collect()
}

async fn all_records(store: &Arc<dyn Store>) -> BTreeMap<String, SyncRecord> {
    let mut out = BTreeMap::new();
    let mut after = None;
    loop {
        let page = store
            .reconcile_record_list(&RecordFilter {
                tenant_id: Uuid::nil(),
                reconciler: NAME.into(),
                in_review: false,
                after_key: after.clone(),
                limit: 5_000,
            })
            .await
            .unwrap();
        let Some(last) = page.last() else {
            return out;
        };
        after = Some(last.key.clone());
        for r in page {
            out.insert(r.key.clone(), r);
        }
    }
}

/// The checkpoint's cursor (0 before the first batch).
async fn cursor(store: &Arc<dyn Store>) -> usize {
    store
        .reconcile_checkpoint_get(Uuid::nil(), NAME)
        .await
        .unwrap()
        .map_or(0, |c| c.cursor.parse().unwrap())
}

/// Every key not edited locally holds exactly the last change of the
/// committed prefix `changes[..upto]`: nothing past the checkpoint is
/// applied, nothing before it is missing.
fn check_prefix(src: &ListSource, upto: usize, recs: &BTreeMap<String, SyncRecord>) {
    let edited = edits();
    let mut want: BTreeMap<&str, &Change> = BTreeMap::new();
    for c in &src.changes[..upto] {
        want.insert(c.key.as_str(), c);
    }
    for (k, c) in &want {
        if edited.contains_key(*k) {
            continue;
        }
        let r = recs
            .get(*k)
            .unwrap_or_else(|| panic!("key {k} of the committed prefix is missing"));
        assert_eq!(
            (r.version, &r.data),
            (c.version, &c.data),
            "key {k}: the record does not match the prefix up to {upto}"
        );
    }
    for (k, r) in recs {
        if !edited.contains_key(k) {
            assert!(
                want.contains_key(k.as_str()),
                "key {k} is applied but its change is past the checkpoint {upto}: {r:?}"
            );
        }
    }
}

async fn run_case(store: Arc<dyn Store>, strategy: ConflictStrategy) {
    let queue = Queue::new(store.clone());
    let src = source();
    for (k, v) in edits() {
        store
            .reconcile_local_put(&LocalPut {
                tenant_id: Uuid::nil(),
                reconciler: NAME.into(),
                key: k,
                data: json!({"local": v}),
                version: v,
                expected_revision: None,
            })
            .await
            .unwrap();
    }
    let reconciler = Arc::new(
        Reconciler::new(
            queue,
            NAME,
            src.clone(),
            ReconcilerStrategy {
                conflict: strategy,
                conflict_reason: "the test exercises each strategy",
                checkpoint: "the source index after the last applied change, per tenant, \
                             committed with the batch",
            },
            ReconcilerConfig {
                interval: Duration::from_millis(20),
                jitter: Duration::from_millis(5),
                batch_size: BATCH,
                ..ReconcilerConfig::default()
            },
        )
        .unwrap(),
    );

    let mut lost_batches = 0;
    for kill in 0..KILLS {
        let before = cursor(&store).await;
        let pulls = src.pulls.load(Ordering::SeqCst);
        let stop = CancellationToken::new();
        let r = reconciler.clone();
        let s = stop.clone();
        let pulled = src.pulled.notified();
        tokio::pin!(pulled);
        pulled.as_mut().enable();
        let task = tokio::spawn(async move { r.run(s).await });
        // Let the kill-th run get some batches in first, then cut the next.
        loop {
            pulled.as_mut().await;
            if src.pulls.load(Ordering::SeqCst) >= pulls + 1 + (kill % 3) as u64 {
                break;
            }
            pulled.set(src.pulled.notified());
            pulled.as_mut().enable();
        }
        for _ in 0..(kill * 7) % 23 {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
        // A commit already sent when the task was cut still lands on the
        // server: read until the cursor holds still around the records.
        let (upto, recs) = loop {
            let upto = cursor(&store).await;
            let recs = all_records(&store).await;
            if cursor(&store).await == upto {
                break (upto, recs);
            }
        };
        let pulled_to =
            before + (src.pulls.load(Ordering::SeqCst) - pulls) as usize * BATCH as usize;
        if upto < pulled_to.min(CHANGES) {
            lost_batches += 1;
        }
        check_prefix(&src, upto, &recs);
    }
    // Memory applies a batch in one critical section with no await inside,
    // so a kill lands only between batches there; on the databases at
    // least one kill must cut a pulled batch, or the test proved nothing.
    if store.backend() != drover::Backend::Memory {
        assert!(
            lost_batches > 0,
            "no kill cut a pulled batch before its commit; the test proved nothing"
        );
    }
    eprintln!("{strategy}: {lost_batches} of {KILLS} kills cut a pulled batch before its commit");

    // Resume from the checkpoint and drain.
    loop {
        let r = reconciler.run_once().await;
        assert!(r.failed.is_empty(), "{:?}", r.failed);
        if r.batches.iter().all(|b| b.pulled == 0) {
            break;
        }
    }
    assert_eq!(cursor(&store).await, CHANGES);
    let recs = all_records(&store).await;
    check_prefix(&src, CHANGES, &recs);
    let mut last: BTreeMap<&str, &Change> = BTreeMap::new();
    for c in &src.changes {
        last.insert(c.key.as_str(), c);
    }
    let edited = edits();
    let mut parked = BTreeSet::new();
    for (k, local_version) in &edited {
        let r = &recs[k];
        let src_last = last[k.as_str()];
        let local = json!({"local": local_version});
        let (want_data, want_review) = match strategy {
            ConflictStrategy::ExternalWins => (src_last.data.clone(), false),
            ConflictStrategy::LocalWins => (local, false),
            ConflictStrategy::NewestVersionWins if *local_version == NEWER => (local, false),
            ConflictStrategy::NewestVersionWins => (src_last.data.clone(), false),
            ConflictStrategy::ParkForReview => (local, true),
        };
        assert_eq!(r.data, want_data, "{strategy}: key {k}");
        assert_eq!(
            r.source_version,
            Some(src_last.version),
            "{strategy}: key {k}"
        );
        if want_review {
            assert_eq!(r.review.as_ref(), Some(src_last), "{strategy}: key {k}");
            parked.insert(k.clone());
        } else {
            assert!(r.review.is_none(), "{strategy}: key {k}");
        }
    }
    let listed: BTreeSet<String> = store
        .reconcile_record_list(&RecordFilter {
            tenant_id: Uuid::nil(),
            reconciler: NAME.into(),
            in_review: true,
            after_key: None,
            limit: 10_000,
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(listed, parked, "{strategy}: the records listed for review");
    let distinct: BTreeSet<&str> = src.changes.iter().map(|c| c.key.as_str()).collect();
    let expected_keys: BTreeSet<&str> = distinct
        .union(&edited.keys().map(String::as_str).collect())
        .copied()
        .collect();
    assert_eq!(recs.len(), expected_keys.len());
}

macro_rules! on_every_backend {
    ($name:ident, $strategy:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory() {
                run_case(
                    Arc::new(drover::store::memory::MemoryStore::new()),
                    $strategy,
                )
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let path =
                    std::env::temp_dir().join(format!("drover-reconcile-{}.db", Uuid::now_v7()));
                let store = drover::store::sqlite::SqliteStore::open(
                    path.to_str().unwrap(),
                    drover::store::sqlite::SqliteOptions::default(),
                )
                .await
                .unwrap();
                store.migrate().await.unwrap();
                run_case(Arc::new(store), $strategy).await;
                let _ = std::fs::remove_file(&path);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let (store, schema) = drover::testing::pg_fresh_store().await;
                run_case(store, $strategy).await;
                drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
            }
        }
    };
}

on_every_backend!(external_wins, ConflictStrategy::ExternalWins);
on_every_backend!(local_wins, ConflictStrategy::LocalWins);
on_every_backend!(newest_version_wins, ConflictStrategy::NewestVersionWins);
on_every_backend!(park_for_review, ConflictStrategy::ParkForReview);

/// A change with a malformed key is refused by the reconciler before the
/// store is asked (the key's one check, above every backend): nothing is
/// applied and the checkpoint does not move. A malformed name is refused
/// when the reconciler is built.
#[tokio::test]
async fn bad_key_or_name_refused_above_the_store() {
    struct BadKey;
    #[async_trait]
    impl Source for BadKey {
        async fn pull(
            &self,
            _tenant: Uuid,
            _cursor: Option<&str>,
            _limit: u32,
        ) -> Result<SourceBatch, SourceError> {
            Ok(SourceBatch {
                changes: vec![
                    Change {
                        key: "fine".into(),
                        version: 1,
                        data: json!({}),
                        deleted: false,
                    },
                    Change {
                        key: String::new(),
                        version: 1,
                        data: json!({}),
                        deleted: false,
                    },
                ],
                cursor: Some("1".into()),
            })
        }
    }
    let store: Arc<dyn Store> = Arc::new(drover::store::memory::MemoryStore::new());
    let queue = Queue::new(Arc::clone(&store));
    let strategy = ReconcilerStrategy {
        conflict: ConflictStrategy::LocalWins,
        conflict_reason: "local edits are authoritative",
        checkpoint: "cursor per tenant",
    };
    match Reconciler::new(
        queue.clone(),
        "Not A Name",
        Arc::new(BadKey),
        strategy,
        ReconcilerConfig::default(),
    ) {
        Err(drover::Error::InvalidInput { field, .. }) => assert_eq!(field, "name"),
        Err(e) => panic!("a bad name: expected InvalidInput, got {e}"),
        Ok(_) => panic!("a bad name: expected InvalidInput, got a reconciler"),
    }
    let r = Reconciler::new(
        queue,
        NAME,
        Arc::new(BadKey),
        strategy,
        ReconcilerConfig::default(),
    )
    .unwrap();
    match r.run_tenant_once(Uuid::nil()).await {
        Err(drover::Error::InvalidInput { field, .. }) => assert_eq!(field, "key"),
        other => panic!("a bad key: expected InvalidInput, got {other:?}"),
    }
    assert!(all_records(&store).await.is_empty(), "nothing applied");
    assert_eq!(cursor(&store).await, 0, "the checkpoint did not move");
}

/// A reconciler declared with a blank strategy is refused; `drover
/// handlers` gets its declaration through the worker's roles.
#[tokio::test]
async fn blank_declaration_refused_and_role_printed() {
    let queue = Queue::new(Arc::new(drover::store::memory::MemoryStore::new()));
    let strategy = ReconcilerStrategy {
        conflict: ConflictStrategy::LocalWins,
        conflict_reason: "",
        checkpoint: "cursor per tenant",
    };
    let err = Reconciler::new(
        queue.clone(),
        NAME,
        source(),
        strategy,
        ReconcilerConfig::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("reason"), "{err}");
    let r = Reconciler::new(
        queue.clone(),
        NAME,
        source(),
        ReconcilerStrategy {
            conflict_reason: "local edits are authoritative",
            ..strategy
        },
        ReconcilerConfig::default(),
    )
    .unwrap();
    let worker = drover::Worker::builder(queue)
        .handler(drover::builtin::NoopHandler)
        .metrics_addr(None)
        .reconciler(r)
        .build()
        .unwrap();
    let role = worker
        .registry()
        .roles()
        .iter()
        .find(|r| r.role == "sync reconciler")
        .expect("the reconciler's role")
        .clone();
    assert_eq!(role.name, NAME);
    assert_eq!(role.strategies[0].0, "conflict");
    assert!(role.strategies[0].1.starts_with("local_wins"));
    let declared: Vec<&str> = role.strategies.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        declared,
        ["conflict", "idempotency", "retry", "checkpoint", "recovery"],
        "all four strategies besides the conflict strategy"
    );
    assert!(role.strategies.iter().all(|(_, v)| !v.trim().is_empty()));
}
