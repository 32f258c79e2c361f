//! The sync reconciler under the faults it must survive:
//!
//! - a local put of a key the source reports for the first time, landing
//!   between the batch's plan and its write (PostgreSQL: the key had no row
//!   to lock), meets the declared conflict strategy instead of being
//!   overwritten; the race is run deterministically by the test hook that
//!   pauses the batch there;
//! - a tenant whose source fails does not stop the tenants after it, is
//!   counted and waits out its own backoff;
//! - a source that panics for one tenant kills nothing: the worker's
//!   reconciler keeps running the other tenants, counts the panics, and
//!   `/healthz`'s health names it failing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use drover::queue::Queue;
use drover::reconcile::{
    ApplyBatch, Change, ConflictStrategy, LocalPut, Reconciler, ReconcilerConfig,
    ReconcilerStrategy, Source, SourceBatch, SourceError, hook,
};
use drover::store::Store;
use serde_json::json;
use uuid::Uuid;

const NAME: &str = "crm";

const STRATEGY: ReconcilerStrategy = ReconcilerStrategy {
    conflict: ConflictStrategy::LocalWins,
    conflict_reason: "the test's local edits are authoritative",
    checkpoint: "a per-tenant cursor committed with each batch",
};

/// The batch plans `k` as new; a local writer creates `k` before the
/// batch writes: the local value must meet the strategy (kept or parked),
/// never be overwritten with `dirty = false`.
async fn first_seen_key_race(store: Arc<dyn Store>, strategy: ConflictStrategy) {
    let tenant = Uuid::now_v7();
    let pause = hook::pause_after_plan(tenant, NAME);
    let change = Change {
        key: "k".into(),
        version: 5,
        data: json!("source"),
        deleted: false,
    };
    let batch = ApplyBatch {
        tenant_id: tenant,
        reconciler: NAME.into(),
        expected_version: 0,
        cursor: "c1".into(),
        changes: vec![change.clone()],
        conflict: strategy,
    };
    let s = store.clone();
    let apply = tokio::spawn(async move { s.reconcile_apply(&batch).await });
    pause.reached.await.expect("the batch reaches its plan");
    let mine = store
        .reconcile_local_put(&LocalPut {
            tenant_id: tenant,
            reconciler: NAME.into(),
            key: "k".into(),
            data: json!("local"),
            version: 9,
            expected_revision: None,
        })
        .await
        .expect("the key is still absent for the local writer");
    pause.release.send(()).expect("the batch waits");
    let report = apply.await.unwrap().expect("the batch lands");
    let k = store
        .reconcile_record_get(tenant, NAME, "k")
        .await
        .unwrap()
        .expect("k exists");
    assert_eq!(report.inserted, 0, "{strategy}: k was not new any more");
    assert_eq!(
        (k.data.clone(), k.dirty, k.source_version),
        (json!("local"), true, Some(5)),
        "{strategy}: the local write was overwritten: {k:?}"
    );
    assert_eq!(k.revision, mine.revision + 1, "{strategy}");
    match strategy {
        ConflictStrategy::ParkForReview => {
            assert_eq!((report.parked, k.review), (1, Some(change)));
        }
        _ => assert_eq!((report.kept_local, k.review), (1, None)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_first_seen_key_meets_the_strategy() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    for s in [ConflictStrategy::LocalWins, ConflictStrategy::ParkForReview] {
        first_seen_key_race(store.clone(), s).await;
    }
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pooled_postgres_first_seen_key_meets_the_strategy() {
    let (store, schema) = drover::testing::pg_fresh_pooled_store().await;
    for s in [ConflictStrategy::LocalWins, ConflictStrategy::ParkForReview] {
        first_seen_key_race(store.clone(), s).await;
    }
    drover::testing::pg_drop_schema(&drover::testing::pg_url().await, &schema).await;
}

/// Hands each tenant one change per pull, fails or panics for `bad`, and
/// counts pulls per tenant (waking the test on each).
struct Flaky {
    bad: Uuid,
    panics: bool,
    pulls: Mutex<HashMap<Uuid, u64>>,
    pulled: tokio::sync::Notify,
}

impl Flaky {
    fn new(bad: Uuid, panics: bool) -> Arc<Self> {
        Arc::new(Flaky {
            bad,
            panics,
            pulls: Mutex::new(HashMap::new()),
            pulled: tokio::sync::Notify::new(),
        })
    }

    fn pulls(&self, tenant: Uuid) -> u64 {
        self.pulls
            .lock()
            .unwrap()
            .get(&tenant)
            .copied()
            .unwrap_or(0)
    }
}

#[async_trait]
impl Source for Flaky {
    async fn pull(
        &self,
        tenant: Uuid,
        cursor: Option<&str>,
        _limit: u32,
    ) -> Result<SourceBatch, SourceError> {
        *self.pulls.lock().unwrap().entry(tenant).or_default() += 1;
        self.pulled.notify_waiters();
        if tenant == self.bad {
            if self.panics {
                panic!("the source broke for tenant {tenant}");
            }
            return Err(SourceError("the source is down for this tenant".into()));
        }
        let n: i64 = cursor.map_or(0, |c| c.parse().unwrap());
        Ok(SourceBatch {
            changes: vec![Change {
                key: format!("k{n}"),
                version: n + 1,
                data: json!(n),
                deleted: false,
            }],
            cursor: Some((n + 1).to_string()),
        })
    }
}

fn tenants() -> [Uuid; 3] {
    [Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3)]
}

/// Tenant 1 of 3 fails: tenants 2 and 3 are still reconciled on every
/// pass; the failure is reported and counted, and tenant 1 waits out its
/// backoff instead of being pulled again at once.
#[tokio::test]
async fn a_failing_tenant_does_not_block_the_others() {
    let queue = Queue::memory();
    let [bad, t2, t3] = tenants();
    let src = Flaky::new(bad, false);
    let r = Reconciler::new(
        queue.clone(),
        NAME,
        src.clone(),
        STRATEGY,
        ReconcilerConfig {
            tenants: tenants().to_vec(),
            backoff_base: Duration::from_secs(3600),
            backoff_cap: Duration::from_secs(7200),
            ..ReconcilerConfig::default()
        },
    )
    .unwrap();
    let first = r.run_once().await;
    assert_eq!(first.failed.len(), 1, "{first:?}");
    assert_eq!(
        (first.failed[0].tenant_id, first.failed[0].in_a_row),
        (bad, 1)
    );
    assert!(!first.failed[0].panicked);
    let ran: Vec<Uuid> = first.batches.iter().map(|b| b.tenant_id).collect();
    assert_eq!(ran, [t2, t3], "the tenants after the failing one ran");
    let second = r.run_once().await;
    assert_eq!(second.waiting, [bad], "the failing tenant backs off");
    assert_eq!(second.batches.len(), 2);
    assert_eq!(src.pulls(bad), 1, "not pulled again during its backoff");
    for t in [t2, t3] {
        let cp = queue
            .store()
            .reconcile_checkpoint_get(t, NAME)
            .await
            .unwrap()
            .expect("reconciled");
        assert_eq!(cp.cursor, "2", "tenant {t} got both passes");
    }
    assert_eq!(r.failing().len(), 1, "the failure stays reported");
}

/// A source that panics for tenant 1 kills neither the worker's
/// reconciler nor the other tenants' progress; the panics are counted and
/// the worker's health names the reconciler failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_source_is_contained() {
    let prometheus = drover::worker::prometheus();
    let queue = Queue::memory();
    let [bad, t2, _] = tenants();
    let src = Flaky::new(bad, true);
    let r = Reconciler::new(
        queue.clone(),
        NAME,
        src.clone(),
        STRATEGY,
        ReconcilerConfig {
            tenants: tenants().to_vec(),
            interval: Duration::from_millis(5),
            jitter: Duration::from_millis(1),
            backoff_base: Duration::from_millis(1),
            backoff_cap: Duration::from_millis(5),
            ..ReconcilerConfig::default()
        },
    )
    .unwrap();
    let worker = drover::Worker::builder(queue.clone())
        .handler(drover::builtin::NoopHandler)
        .metrics_addr(None)
        .reconciler(r)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    // Until the source panicked twice and tenant 2 was pulled twice after
    // the first panic: the task survived a panic and went on.
    let wait = async {
        let mut after_panic = None;
        loop {
            let pulled = src.pulled.notified();
            tokio::pin!(pulled);
            pulled.as_mut().enable();
            let (panics, p2) = (src.pulls(bad), src.pulls(t2));
            if panics >= 1 && after_panic.is_none() {
                after_panic = Some(p2);
            }
            if panics >= 2 && after_panic.is_some_and(|p| p2 >= p + 2) {
                return;
            }
            pulled.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("the reconciler stopped after the panic");
    let failing = worker.health().failing();
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].0, "sync reconciler crm");
    assert!(failing[0].1.contains("panicked"), "{failing:?}");
    assert!(worker.health().is_healthy(), "the process itself is alive");
    if let Some(p) = prometheus {
        let text = p.render();
        assert!(
            text.lines()
                .any(|l| l.starts_with("drover_reconcile_failed_total")
                    && l.contains("cause=\"panic\"")),
            "{text}"
        );
    }
    worker.shutdown().await;
    let cp = queue
        .store()
        .reconcile_checkpoint_get(t2, NAME)
        .await
        .unwrap()
        .expect("tenant 2 progressed");
    assert!(cp.version >= 2);
}
