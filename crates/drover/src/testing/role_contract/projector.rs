//! Contract cases of the projector checkpoints
//! ([`ProjectorStore`](crate::projector::ProjectorStore)): one lease holder
//! at a time, every checkpoint write fenced (stale token, passed lease,
//! moved checkpoint), a failed apply leaves the checkpoint unmoved, a
//! rebuild resets and replays, checkpoints are per tenant, and the purge
//! never passes a checkpoint. Run by every backend through
//! [`events_contract_suite!`](crate::events_contract_suite).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use uuid::Uuid;

use crate::error::ErrorKind;
use crate::projector::{ProjectorConfig, ProjectorRunner};
use crate::store::contract::{Harness, LONG, PAST_SHORT, SHORT, assert_kind, tenant_a, tenant_b};
use crate::store::events::{Event, NewEvent};
use crate::store::projector::{LeaseParams, ProjectionTx, Projector, ProjectorStrategy};

/// Expands to one `#[tokio::test]` per event-log contract case and per
/// projector case (the checkpoints and the runner).
#[macro_export]
macro_rules! events_contract_suite {
    ($setup:path) => {
        $crate::__events_cases!($setup;
            event_positions_are_dense_and_ordered,
            event_append_twice_is_a_no_op,
            event_concurrent_appenders_leave_no_gap,
            event_tenants_isolated,
            event_read_filters_topics_and_limit,
            event_invalid_append_writes_nothing,
            event_purge_removes_old_keeps_new_and_positions,
        );
        $crate::__projector_cases!($setup;
            projector_lease_is_exclusive_and_resumes,
            projector_apply_is_fenced,
            projector_runner_applies_in_order_and_never_skips,
            projector_rebuild_resets_and_replays,
            projector_rebuild_request_refuses_a_bad_name,
            projector_checkpoints_per_tenant,
            projector_checkpoint_pins_the_purge,
            projector_purge_keeps_tenants_not_reached_yet,
            projector_runner_pages_through_every_tenant,
            projector_panic_is_a_failed_batch,
            projector_checkpoints_of_removed_projectors_are_forgotten,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __projector_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::testing::role_contract::projector::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

/// Records what it applied in memory; fails on `fail_at` while it is set,
/// and panics on `panic_at` (tenant, position) while that is set.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(Uuid, i64)>>,
    resets: Mutex<Vec<Uuid>>,
    fail_at: Mutex<Option<i64>>,
    panic_at: Mutex<Option<(Uuid, i64)>>,
}

#[async_trait]
impl Projector for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn topics(&self) -> Vec<String> {
        vec!["kept".into()]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "a test double: records every call",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the test reads the checkpoint rows after each pass",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset forgets nothing; it is recorded",
            lag: "none: read by the test after each pass",
        }
    }
    async fn apply(&self, e: &Event, _tx: &mut ProjectionTx<'_>) -> crate::Result<()> {
        if *self.fail_at.lock().expect("lock") == Some(e.position) {
            return Err(crate::store::projector::apply_failed("refused on purpose"));
        }
        let panic_here = *self.panic_at.lock().expect("lock") == Some((e.tenant, e.position));
        if panic_here {
            panic!("a projector bug, on purpose");
        }
        self.seen.lock().expect("lock").push((e.tenant, e.position));
        Ok(())
    }
    async fn reset(&self, tenant: Uuid, _tx: &mut ProjectionTx<'_>) -> crate::Result<()> {
        self.resets.lock().expect("lock").push(tenant);
        Ok(())
    }
}

fn params(tenant: Uuid, holder: &str, lease: Duration) -> LeaseParams {
    LeaseParams {
        projector: "recorder".into(),
        tenant,
        holder: holder.into(),
        lease,
    }
}

async fn append(h: &Harness, tenant: Uuid, topics: &[&str]) {
    let batch: Vec<NewEvent> = topics
        .iter()
        .map(|t| NewEvent::new(*t, json!({})).in_tenant(tenant))
        .collect();
    h.store.event_append_many(&batch).await.expect("append");
}

/// One holder at a time; a released or passed lease can be taken again,
/// and the new holder resumes from the checkpoint.
pub async fn projector_lease_is_exclusive_and_resumes(h: &Harness) {
    append(h, tenant_a(), &["kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    let l1 = h
        .store
        .projector_lease_take(&params(tenant_a(), "w1", SHORT))
        .await
        .expect("take")
        .expect("free");
    assert_eq!(l1.position, 0);
    assert!(
        h.store
            .projector_lease_take(&params(tenant_a(), "w2", LONG))
            .await
            .expect("take")
            .is_none(),
        "held"
    );
    let events = h
        .store
        .event_read(tenant_a(), 0, &[], 1)
        .await
        .expect("read");
    let l1 = h
        .store
        .projector_apply(&l1, SHORT, &events, &*p)
        .await
        .expect("apply");
    assert_eq!(l1.position, 1);
    h.pass(PAST_SHORT).await;
    let l2 = h
        .store
        .projector_lease_take(&params(tenant_a(), "w2", LONG))
        .await
        .expect("take")
        .expect("passed");
    assert_eq!(l2.position, 1, "resumes from the checkpoint");
    assert_ne!(l2.token, l1.token);
    h.store.projector_lease_release(&l2).await.expect("release");
    let l3 = h
        .store
        .projector_lease_take(&params(tenant_a(), "w3", LONG))
        .await
        .expect("take");
    assert!(l3.is_some(), "a released lease is free");
}

/// A stale token, a passed lease or a checkpoint that moved: the write
/// changes nothing and answers `Conflict`.
pub async fn projector_apply_is_fenced(h: &Harness) {
    append(h, tenant_a(), &["kept", "kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    let events = h
        .store
        .event_read(tenant_a(), 0, &[], 10)
        .await
        .expect("read");
    let old = h
        .store
        .projector_lease_take(&params(tenant_a(), "w1", SHORT))
        .await
        .expect("take")
        .expect("free");
    h.pass(PAST_SHORT).await;
    assert_kind(
        h.store.projector_apply(&old, LONG, &events[..1], &*p).await,
        ErrorKind::Conflict,
        "passed lease",
    );
    let new = h
        .store
        .projector_lease_take(&params(tenant_a(), "w2", LONG))
        .await
        .expect("take")
        .expect("passed");
    assert_kind(
        h.store.projector_apply(&old, LONG, &events[..1], &*p).await,
        ErrorKind::Conflict,
        "stale token",
    );
    let moved = h
        .store
        .projector_apply(&new, LONG, &events[..2], &*p)
        .await
        .expect("apply");
    assert_eq!(moved.position, 2);
    assert_kind(
        h.store.projector_apply(&new, LONG, &events[2..], &*p).await,
        ErrorKind::Conflict,
        "a lease whose checkpoint moved since",
    );
    assert_kind(
        h.store.projector_rebuild(&old, LONG, &*p).await,
        ErrorKind::Conflict,
        "stale rebuild",
    );
    let rows = h
        .store
        .projector_checkpoints(Some("recorder"))
        .await
        .expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].position, 2);
    assert_eq!(rows[0].holder.as_deref(), Some("w2"));
    let seen = p.seen.lock().expect("lock").clone();
    assert_eq!(seen, vec![(tenant_a(), 1), (tenant_a(), 2)]);
}

/// The runner applies only its topics, in order, moves past the others,
/// and a failing event stops it without moving the checkpoint past it;
/// once it applies, the runner goes on from there.
pub async fn projector_runner_applies_in_order_and_never_skips(h: &Harness) {
    append(h, tenant_a(), &["kept", "other", "kept", "kept"]).await;
    append(h, tenant_b(), &["kept"]).await;
    let p = Arc::new(Recorder::default());
    *p.fail_at.lock().expect("lock") = Some(3);
    let runner = ProjectorRunner::new(
        Arc::clone(&h.store),
        Arc::clone(&p) as Arc<dyn Projector>,
        ProjectorConfig {
            batch: 2,
            // Retried on the very next pass.
            backoff_base: Duration::ZERO,
            ..ProjectorConfig::default()
        },
    )
    .expect("runner");
    let r = runner.run_once().await.expect("pass");
    assert_eq!((r.tenants, r.failed), (2, 1));
    let rows = h
        .store
        .projector_checkpoints(Some("recorder"))
        .await
        .expect("rows");
    let pos = |t: Uuid| rows.iter().find(|r| r.tenant == t).map(|r| r.position);
    assert_eq!(pos(tenant_a()), Some(2), "stopped before the failing batch");
    assert_eq!(pos(tenant_b()), Some(1));
    assert_eq!(r.behind_events, 2);
    *p.fail_at.lock().expect("lock") = None;
    let r = runner.run_once().await.expect("pass");
    assert_eq!((r.failed, r.behind_events), (0, 0));
    let seen_a: Vec<i64> = p
        .seen
        .lock()
        .expect("lock")
        .iter()
        .filter(|(t, _)| *t == tenant_a())
        .map(|(_, p)| *p)
        .collect();
    // Exactly once on every backend, no de-duplication: the failing batch
    // fails on its first event (nothing of it applied anywhere), and the
    // batch before it moved the checkpoint, so nothing is replayed. (The
    // memory store is at least once only across a crash between an apply
    // and its checkpoint, which this case does not make.)
    assert_eq!(seen_a, vec![1, 3, 4], "its topics only, in order, once");
}

/// A requested rebuild resets the tenant's projection and replays it from
/// the start, while new events appended meanwhile are applied after.
pub async fn projector_rebuild_resets_and_replays(h: &Harness) {
    append(h, tenant_a(), &["kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    let runner = ProjectorRunner::new(
        Arc::clone(&h.store),
        Arc::clone(&p) as Arc<dyn Projector>,
        ProjectorConfig::default(),
    )
    .expect("runner");
    runner.run_once().await.expect("pass");
    assert_eq!(p.seen.lock().expect("lock").len(), 2);
    let n = h
        .store
        .projector_request_rebuild("recorder", Some(tenant_a()))
        .await
        .expect("request");
    assert_eq!(n, 1);
    append(h, tenant_a(), &["kept"]).await;
    let r = runner.run_once().await.expect("pass");
    assert_eq!(r.rebuilt, 1);
    assert_eq!(*p.resets.lock().expect("lock"), vec![tenant_a()]);
    let seen: Vec<i64> = p
        .seen
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, p)| *p)
        .collect();
    assert_eq!(
        seen,
        vec![1, 2, 1, 2, 3],
        "replayed from the start, then the new one"
    );
    let rows = h
        .store
        .projector_checkpoints(Some("recorder"))
        .await
        .expect("rows");
    assert_eq!((rows[0].position, rows[0].rebuilds), (3, 1));
    assert!(!rows[0].rebuild_requested);
    assert_eq!(
        h.store
            .projector_request_rebuild("recorder", None)
            .await
            .expect("all"),
        1
    );
}

/// The queue refuses a rebuild request for a malformed projector name (the
/// name's one check, above every backend) and flags nothing.
pub async fn projector_rebuild_request_refuses_a_bad_name(h: &Harness) {
    let queue = crate::Queue::new(Arc::clone(&h.store));
    for tenant in [Some(tenant_a()), None] {
        match queue.projector_request_rebuild("Not A Name", tenant).await {
            Err(crate::Error::InvalidInput { field, .. }) => assert_eq!(field, "kind"),
            other => panic!("a bad name: expected InvalidInput, got {other:?}"),
        }
    }
    assert!(
        h.store
            .projector_checkpoints(None)
            .await
            .expect("rows")
            .is_empty(),
        "nothing flagged"
    );
}

/// Checkpoints are per tenant: tenant A's lease and apply never move B's.
pub async fn projector_checkpoints_per_tenant(h: &Harness) {
    append(h, tenant_a(), &["kept"]).await;
    append(h, tenant_b(), &["kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    let la = h
        .store
        .projector_lease_take(&params(tenant_a(), "w1", LONG))
        .await
        .expect("take")
        .expect("free");
    let lb = h
        .store
        .projector_lease_take(&params(tenant_b(), "w1", LONG))
        .await
        .expect("take")
        .expect("free, another tenant");
    let b_events = h
        .store
        .event_read(tenant_b(), 0, &[], 10)
        .await
        .expect("read");
    assert_kind(
        h.store.projector_apply(&la, LONG, &b_events, &*p).await,
        ErrorKind::InvalidInput,
        "another tenant's events under A's lease",
    );
    h.store
        .projector_apply(&lb, LONG, &b_events, &*p)
        .await
        .expect("apply b");
    let rows = h
        .store
        .projector_checkpoints(Some("recorder"))
        .await
        .expect("rows");
    let pos = |t: Uuid| rows.iter().find(|r| r.tenant == t).map(|r| r.position);
    assert_eq!((pos(tenant_a()), pos(tenant_b())), (Some(0), Some(2)));
}

/// The purge never removes an event a checkpoint has not passed.
pub async fn projector_checkpoint_pins_the_purge(h: &Harness) {
    append(h, tenant_a(), &["kept", "kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    let l = h
        .store
        .projector_lease_take(&params(tenant_a(), "w1", LONG))
        .await
        .expect("take")
        .expect("free");
    let events = h
        .store
        .event_read(tenant_a(), 0, &[], 1)
        .await
        .expect("read");
    h.store
        .projector_apply(&l, LONG, &events, &*p)
        .await
        .expect("apply");
    let all = h.store.db_now().await.expect("now") + chrono::Duration::hours(1);
    let mut pinned = false;
    for _ in 0..8 {
        pinned |= h.store.event_purge(all).await.expect("purge").pinned;
    }
    assert!(pinned, "the purge reports the pin");
    let left: Vec<i64> = h
        .store
        .event_read(tenant_a(), 0, &[], 10)
        .await
        .expect("read")
        .iter()
        .map(|e| e.position)
        .collect();
    assert!(
        left.ends_with(&[2, 3]),
        "events after the checkpoint stay: {left:?}"
    );
}

/// A tenant with events but no checkpoint row of a known projector yet (its
/// runner has not reached it) keeps its events through the purge: it counts
/// as checkpoint 0, not as unpinned.
pub async fn projector_purge_keeps_tenants_not_reached_yet(h: &Harness) {
    append(h, tenant_a(), &["kept"]).await;
    append(h, tenant_b(), &["kept", "kept"]).await;
    let p = Arc::new(Recorder::default());
    // The projector runs for tenant A only (its runner has not reached B).
    let l = h
        .store
        .projector_lease_take(&params(tenant_a(), "w1", LONG))
        .await
        .expect("take")
        .expect("free");
    let events = h
        .store
        .event_read(tenant_a(), 0, &[], 10)
        .await
        .expect("read");
    h.store
        .projector_apply(&l, LONG, &events, &*p)
        .await
        .expect("apply");
    let all = h.store.db_now().await.expect("now") + chrono::Duration::hours(1);
    let mut pinned = false;
    for _ in 0..8 {
        pinned |= h.store.event_purge(all).await.expect("purge").pinned;
    }
    assert!(pinned, "the purge reports the pin");
    let left_b: Vec<i64> = h
        .store
        .event_read(tenant_b(), 0, &[], 10)
        .await
        .expect("read")
        .iter()
        .map(|e| e.position)
        .collect();
    assert_eq!(
        left_b,
        vec![1, 2],
        "no projector has applied B's events: none may go"
    );
}

/// A pass pages through every tenant behind its head, however many there
/// are (here more than one page of the discovery), skips the caught-up
/// ones, and reports the lag of all of them from one aggregate read.
pub async fn projector_runner_pages_through_every_tenant(h: &Harness) {
    let tenants: Vec<Uuid> = (1..=5u128).map(|n| Uuid::from_u128(0x7E00 + n)).collect();
    for t in &tenants {
        append(h, *t, &["kept", "other"]).await;
    }
    let lag = h.store.projector_lag("recorder").await.expect("lag");
    assert_eq!((lag.tenants, lag.behind_events), (5, 10));
    let page = h
        .store
        .projector_pending("recorder", None, 2)
        .await
        .expect("page");
    assert_eq!(page, tenants[..2].to_vec());
    let page = h
        .store
        .projector_pending("recorder", Some(tenants[3]), 2)
        .await
        .expect("page");
    assert_eq!(page, vec![tenants[4]]);
    let p = Arc::new(Recorder::default());
    let runner = ProjectorRunner::new(
        Arc::clone(&h.store),
        Arc::clone(&p) as Arc<dyn Projector>,
        ProjectorConfig {
            tenant_page: 2,
            ..ProjectorConfig::default()
        },
    )
    .expect("runner");
    let r = runner.run_once().await.expect("pass");
    assert_eq!((r.tenants, r.leased, r.failed), (5, 5, 0));
    assert_eq!((r.behind_events, r.applied), (0, 10));
    let mut seen: Vec<Uuid> = p
        .seen
        .lock()
        .expect("lock")
        .iter()
        .map(|(t, _)| *t)
        .collect();
    seen.sort();
    assert_eq!(seen, tenants, "every tenant, past the first page");
    let r = runner.run_once().await.expect("pass");
    assert_eq!(r.tenants, 0, "caught-up tenants are not visited");
    append(h, tenants[4], &["kept"]).await;
    let lag = h.store.projector_lag("recorder").await.expect("lag");
    assert_eq!((lag.tenants, lag.behind_events), (1, 1));
    let r = runner.run_once().await.expect("pass");
    assert_eq!((r.tenants, r.applied, r.behind_events), (1, 1, 0));
}

/// A panic in `apply` is a failed batch: nothing of it applied, the
/// checkpoint unmoved, the runner (and its other tenants) goes on, the
/// tenant is counted failing and retried, and it moves once `apply` stops
/// panicking.
pub async fn projector_panic_is_a_failed_batch(h: &Harness) {
    append(h, tenant_a(), &["kept", "kept"]).await;
    append(h, tenant_b(), &["kept"]).await;
    let p = Arc::new(Recorder::default());
    *p.panic_at.lock().expect("lock") = Some((tenant_a(), 2));
    let runner = ProjectorRunner::new(
        Arc::clone(&h.store),
        Arc::clone(&p) as Arc<dyn Projector>,
        ProjectorConfig {
            batch: 1,
            backoff_base: Duration::ZERO,
            ..ProjectorConfig::default()
        },
    )
    .expect("runner");
    let r = runner
        .run_once()
        .await
        .expect("the pass survives the panic");
    assert_eq!((r.failed, r.panicked), (1, 1));
    assert_eq!(runner.failing_tenants(), 1);
    let pos = |rows: &[crate::store::projector::CheckpointRow], t: Uuid| {
        rows.iter().find(|r| r.tenant == t).map(|r| r.position)
    };
    let rows = h
        .store
        .projector_checkpoints(Some("recorder"))
        .await
        .expect("rows");
    assert_eq!(pos(&rows, tenant_a()), Some(1), "stopped before the panic");
    assert_eq!(pos(&rows, tenant_b()), Some(1), "the other tenant went on");
    assert_eq!(r.behind_events, 1);
    let r = runner.run_once().await.expect("retried, panics again");
    assert_eq!((r.tenants, r.panicked), (1, 1));
    *p.panic_at.lock().expect("lock") = None;
    let r = runner.run_once().await.expect("pass");
    assert_eq!((r.failed, r.applied, r.behind_events), (0, 1, 0));
    assert_eq!(runner.failing_tenants(), 0);
    let seen_a: Vec<i64> = p
        .seen
        .lock()
        .expect("lock")
        .iter()
        .filter(|(t, _)| *t == tenant_a())
        .map(|(_, p)| *p)
        .collect();
    assert_eq!(
        seen_a,
        vec![1, 2],
        "the panicking event applied once, after"
    );
}

/// The checkpoints of a projector no runner has recorded alive since the
/// cut-off are deleted (and stop pinning the purge); a live projector's
/// are kept, however old.
pub async fn projector_checkpoints_of_removed_projectors_are_forgotten(h: &Harness) {
    append(h, tenant_a(), &["kept"]).await;
    for name in ["recorder", "gone"] {
        h.store
            .projector_lease_take(&LeaseParams {
                projector: name.into(),
                ..params(tenant_a(), "w1", LONG)
            })
            .await
            .expect("take")
            .expect("free");
    }
    h.pass(Duration::from_millis(20)).await;
    let cut = h.store.db_now().await.expect("now");
    h.pass(Duration::from_millis(20)).await;
    h.store.projector_seen("recorder").await.expect("seen");
    let n = h.store.projector_forget(cut).await.expect("forget");
    assert_eq!(n, 1, "the removed projector's one row");
    let names: Vec<String> = h
        .store
        .projector_checkpoints(None)
        .await
        .expect("rows")
        .into_iter()
        .map(|r| r.projector)
        .collect();
    assert_eq!(names, vec!["recorder".to_owned()]);
    assert_eq!(
        h.store.projector_forget(cut).await.expect("again"),
        0,
        "nothing more to forget"
    );
}
