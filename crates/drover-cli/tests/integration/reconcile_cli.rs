//! `drover reconcile checkpoints|reviews|resolve` and the sync reconciler's
//! declared strategies in `drover handlers`, in process over an in-memory
//! queue.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use clap::Parser;
use drover::Queue;
use drover::reconcile::{
    Change, ConflictStrategy, LocalPut, Reconciler, ReconcilerConfig, ReconcilerStrategy, Source,
    SourceBatch, SourceError,
};
use uuid::Uuid;

const STRATEGY: ReconcilerStrategy = ReconcilerStrategy {
    conflict: ConflictStrategy::ParkForReview,
    conflict_reason: "both sides edit customers; a person decides",
    checkpoint: "the CRM's change cursor per tenant, committed with each batch",
};

/// Two changes of `a` and one of `b`.
struct Crm;

#[async_trait::async_trait]
impl Source for Crm {
    async fn pull(
        &self,
        _tenant: Uuid,
        cursor: Option<&str>,
        _limit: u32,
    ) -> Result<SourceBatch, SourceError> {
        if cursor.is_some() {
            return Ok(SourceBatch::default());
        }
        let ch = |key: &str, version, v: &str| Change {
            key: key.into(),
            version,
            data: serde_json::json!(v),
            deleted: false,
        };
        Ok(SourceBatch {
            changes: vec![
                ch("a", 2, "crm-a"),
                ch("b", 2, "crm-b"),
                ch("c", 1, "crm-c"),
            ],
            cursor: Some("c1".into()),
        })
    }
}

fn reconciler(queue: &Queue) -> Reconciler {
    Reconciler::new(
        queue.clone(),
        "crm",
        Arc::new(Crm),
        STRATEGY,
        ReconcilerConfig::default(),
    )
    .unwrap()
}

fn drover(queue: &Queue, args: &[&str]) -> (i32, String, String) {
    let cli =
        drover_cli::Cli::try_parse_from(std::iter::once("drover").chain(args.iter().copied()))
            .expect("parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = {
        let q = queue.clone();
        let mut cx = drover_cli::Context::with_queue(queue.clone(), &mut out, &mut err)
            .with_worker_setup(move |b| b.reconciler(reconciler(&q)));
        let rt = tokio::runtime::Handle::current();
        match tokio::task::block_in_place(|| {
            rt.block_on(drover_cli::execute(&cli.command, &mut cx))
        }) {
            Ok(()) => 0,
            Err(e) => {
                writeln!(cx.err, "error: {e}").unwrap();
                i32::from(e.exit_code())
            }
        }
    };
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_reviews_resolve_and_handlers() {
    let queue = Queue::memory();
    let store = queue.store().clone();
    let (code, out, _) = drover(&queue, &["reconcile", "checkpoints"]);
    assert_eq!((code, out.trim()), (0, "no checkpoints"));
    for k in ["a", "b"] {
        store
            .reconcile_local_put(&LocalPut {
                tenant_id: Uuid::nil(),
                reconciler: "crm".into(),
                key: k.into(),
                data: serde_json::json!("local"),
                version: 1,
                expected_revision: None,
            })
            .await
            .unwrap();
    }
    let r = reconciler(&queue).run_once().await;
    assert_eq!(r.batches[0].applied.parked, 2);

    let (code, out, _) = drover(&queue, &["reconcile", "checkpoints"]);
    assert_eq!(code, 0);
    assert!(out.contains("crm") && out.contains("c1"), "{out}");
    let (code, out, _) = drover(&queue, &["reconcile", "checkpoints", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v[0]["cursor"], "c1");

    let (code, out, _) = drover(&queue, &["reconcile", "reviews", "crm"]);
    assert_eq!(code, 0);
    assert!(out.contains("crm-a") && out.contains("crm-b"), "{out}");
    assert!(!out.contains("crm-c"), "{out}");

    let (code, out, _) = drover(
        &queue,
        &["reconcile", "resolve", "crm", "a", "--accept-external"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("took the source's change"), "{out}");
    let (code, out, _) = drover(
        &queue,
        &["reconcile", "resolve", "crm", "b", "--keep-local", "--json"],
    );
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["data"], "local");
    let (code, out, _) = drover(&queue, &["reconcile", "reviews", "crm", "--json"]);
    assert_eq!((code, out.trim()), (0, "[]"));
    // Nothing left to resolve: a conflict (exit 1); no such record: exit 1.
    let (code, _, err) = drover(
        &queue,
        &["reconcile", "resolve", "crm", "a", "--keep-local"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no review pending"), "{err}");
    let (code, _, _) = drover(
        &queue,
        &["reconcile", "resolve", "crm", "zz", "--keep-local"],
    );
    assert_eq!(code, 1);
    // A bad name is exit 2.
    let (code, _, _) = drover(&queue, &["reconcile", "reviews", "Bad Name"]);
    assert_eq!(code, 2);

    let (code, out, err) = drover(&queue, &["handlers"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sync reconciler"), "{out}");
    assert!(
        out.contains("park_for_review: both sides edit customers"),
        "{out}"
    );
    assert!(out.contains("the CRM's change cursor"), "{out}");
}
