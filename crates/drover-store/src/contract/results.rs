//! Contract cases for work that waits for work, the item's own half: a
//! handler's result stored by the fenced completion, progress fenced on the
//! claim and kept across retries, and a key unique only while its item is
//! active (docs/results.md).

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::Completion;
use drover_core::item::Progress;

fn kind_only(kind: &str) -> ClaimParams {
    ClaimParams {
        kinds: vec![kind.into()],
        ..claim_params("default", 10, LONG)
    }
}

async fn claim_kind(h: &Harness, kind: &str) -> (Item, ClaimRef) {
    let got = h.store.item_claim(&kind_only(kind)).await.expect("claim");
    assert_eq!(got.len(), 1, "expected one claimable {kind} item");
    let item = got.into_iter().next().expect("one");
    let r = ClaimRef::of(&item).expect("token");
    (item, r)
}

/// A result is stored by the completion that ends the claim (single and
/// batched, with and without results in one batch), and an item completed
/// without one has none.
pub async fn result_stored_with_completion(h: &Harness) {
    let one = put(h, new("res.one")).await;
    let (_, r) = claim_kind(h, "res.one").await;
    let value = json!({"total": 42, "lines": ["a", "b"]});
    h.store
        .item_complete_with(&r, Some(&value))
        .await
        .expect("complete with result");
    let got = get(h, Uuid::nil(), one.id).await;
    assert_eq!(got.status, Status::Done);
    assert_eq!(got.result, Some(value));

    let a = put(h, new("res.many")).await;
    let b = put(h, new("res.many")).await;
    let c = put(h, new("res.many")).await;
    let claimed = h
        .store
        .item_claim(&kind_only("res.many"))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3);
    let done: Vec<Completion> = claimed
        .iter()
        .map(|it| Completion {
            claim: ClaimRef::of(it).expect("token"),
            result: (it.id != c.id).then(|| json!({"of": it.id.to_string()})),
        })
        .collect();
    let landed = h
        .store
        .item_complete_many_with(&done)
        .await
        .expect("complete many");
    assert_eq!(landed.len(), 3);
    for id in [a.id, b.id] {
        let got = get(h, Uuid::nil(), id).await;
        assert_eq!(got.result, Some(json!({"of": id.to_string()})));
    }
    assert_eq!(get(h, Uuid::nil(), c.id).await.result, None);

    // A batch without any result takes the plain statement; still none.
    let plain = put(h, new("res.plain")).await;
    let (_, r) = claim_kind(h, "res.plain").await;
    assert_eq!(
        h.store.item_complete_many(&[r]).await.expect("many"),
        vec![plain.id]
    );
    let got = get(h, Uuid::nil(), plain.id).await;
    assert_eq!((got.status, got.result), (Status::Done, None));
}

/// A stale holder's completion with a result is refused and stores nothing:
/// neither alone (`Conflict`) nor in a batch (not landed).
pub async fn stale_completion_with_result_stores_nothing(h: &Harness) {
    let it = put(h, new("res.stale")).await;
    let (_, old) = claim_kind(h, "res.stale").await;
    h.store
        .item_fail(&old, &fail_params(Duration::ZERO))
        .await
        .expect("fail");
    let (_, current) = claim_kind(h, "res.stale").await;
    let value = json!({"from": "the stale holder"});
    assert_kind(
        h.store.item_complete_with(&old, Some(&value)).await,
        ErrorKind::Conflict,
        "stale completion with a result",
    );
    let landed = h
        .store
        .item_complete_many_with(&[Completion {
            claim: old,
            result: Some(value.clone()),
        }])
        .await
        .expect("many");
    assert!(landed.is_empty(), "a stale batch entry must not land");
    let got = get(h, Uuid::nil(), it.id).await;
    assert_eq!((got.status, got.result), (Status::Claimed, None));
    // The current holder's completion lands with its own result.
    h.store
        .item_complete_with(&current, Some(&json!("mine")))
        .await
        .expect("current completes");
    assert_eq!(get(h, Uuid::nil(), it.id).await.result, Some(json!("mine")));
}

/// The purge by retention takes a done item's result with its row.
pub async fn result_purged_with_item(h: &Harness) {
    let it = put(h, new("res.purge")).await;
    let (_, r) = claim_kind(h, "res.purge").await;
    h.store
        .item_complete_with(&r, Some(&json!({"big": "x".repeat(1000)})))
        .await
        .expect("complete");
    h.pass(Duration::from_millis(300)).await;
    let cutoff = match &h.clock {
        Some(c) => {
            use crate::Clock;
            c.now()
        }
        None => Utc::now(),
    };
    let purged = h.store.item_purge(cutoff, 100).await.expect("purge");
    assert_eq!(purged, 1);
    assert!(
        h.store
            .item_get(Uuid::nil(), it.id)
            .await
            .expect("get")
            .is_none(),
        "the item and its result are gone"
    );
}

/// Progress is fenced on the claim (a stale holder's report is refused),
/// latest wins, and it is kept when the item retries: the next claim reads
/// it back as a checkpoint.
pub async fn progress_fenced_and_kept_across_retry(h: &Harness) {
    let it = put(h, new("prog")).await;
    let (first, r) = claim_kind(h, "prog").await;
    assert_eq!(first.progress, None);
    let p1 = Progress {
        value: Some(10.0),
        data: None,
    };
    let p2 = Progress {
        value: Some(55.5),
        data: Some(json!({"cursor": 1200})),
    };
    h.store.item_progress(&r, &p1).await.expect("progress 1");
    h.store.item_progress(&r, &p2).await.expect("progress 2");
    assert_eq!(get(h, Uuid::nil(), it.id).await.progress, Some(p2.clone()));
    h.store
        .item_fail(&r, &fail_params(Duration::ZERO))
        .await
        .expect("fail");
    assert_kind(
        h.store
            .item_progress(
                &r,
                &Progress {
                    value: Some(99.0),
                    data: None,
                },
            )
            .await,
        ErrorKind::Conflict,
        "progress from a stale holder",
    );
    let (second, r2) = claim_kind(h, "prog").await;
    assert_eq!(second.attempts, 1);
    assert_eq!(second.progress, Some(p2), "the retry reads the checkpoint");
    let other = ClaimRef {
        tenant_id: tenant_b(),
        ..r2
    };
    assert_kind(
        h.store.item_progress(&other, &p1).await,
        ErrorKind::NotFound,
        "progress under another tenant",
    );
}

/// Unique while active: of 50 concurrent enqueues of one key while none is
/// active, exactly one inserts and the rest answer that item; the same key
/// of another kind or as a plain idempotency key is independent; once the
/// item is final the next enqueue creates a new one; bulk enqueue obeys it.
pub async fn unique_while_active_exact_under_concurrency(h: &Harness) {
    let keyed = || {
        NewItem::new("sync.account", json!({"account": 42}))
            .with_key("sync:42")
            .with_unique_while_active()
    };
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let store = h.store.clone();
        let item = keyed();
        tasks.push(tokio::spawn(async move { store.item_insert(&item).await }));
    }
    let mut inserted = Vec::new();
    let mut answered = Vec::new();
    for t in tasks {
        let ins = t.await.expect("join").expect("insert");
        match ins.result {
            InsertResult::Inserted => inserted.push(ins.item.id),
            InsertResult::KeyExists => answered.push(ins.item.id),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(inserted.len(), 1, "exactly one item under concurrency");
    let first = inserted[0];
    assert!(
        answered.iter().all(|id| *id == first),
        "every refusal answers the active item"
    );
    let row = get(h, Uuid::nil(), first).await;
    assert_eq!(row.active_key.as_deref(), Some("sync:42"));
    assert_eq!(row.idempotency_key, None);

    // Another kind, and a plain idempotency key, do not collide with it.
    let other_kind = NewItem::new("sync.other", json!({}))
        .with_key("sync:42")
        .with_unique_while_active();
    assert_eq!(
        h.store
            .item_insert(&other_kind)
            .await
            .expect("other kind")
            .result,
        InsertResult::Inserted
    );
    let plain = NewItem::new("sync.account", json!({})).with_key("sync:42");
    assert_eq!(
        h.store.item_insert(&plain).await.expect("plain").result,
        InsertResult::Inserted
    );

    // Claimed is still active.
    let claimed = h
        .store
        .item_claim(&kind_only("sync.account"))
        .await
        .expect("claim");
    let held = claimed
        .iter()
        .find(|i| i.id == first)
        .expect("the keyed item");
    let r = ClaimRef::of(held).expect("token");
    let again = h.store.item_insert(&keyed()).await.expect("while claimed");
    assert_eq!(
        (again.result, again.item.id),
        (InsertResult::KeyExists, first)
    );
    h.store.item_complete(&r).await.expect("complete");

    // Final: the next enqueue creates a new item, exactly once again.
    let next = h.store.item_insert(&keyed()).await.expect("after done");
    assert_eq!(next.result, InsertResult::Inserted);
    assert_ne!(next.item.id, first);
    let bulk = h
        .store
        .item_insert_many(&[keyed(), keyed()])
        .await
        .expect("bulk");
    assert_eq!(bulk, vec![InsertResult::KeyExists, InsertResult::KeyExists]);
    assert_eq!(
        h.store.item_insert(&keyed()).await.expect("again").item.id,
        next.item.id
    );

    // Cancel the active one: the key is free, and a bulk enqueue of two
    // takes it once.
    h.store
        .item_cancel(Uuid::nil(), next.item.id, Uuid::nil())
        .await
        .expect("cancel");
    let bulk = h
        .store
        .item_insert_many(&[keyed(), keyed()])
        .await
        .expect("bulk after cancel");
    assert_eq!(bulk, vec![InsertResult::Inserted, InsertResult::KeyExists]);
}
