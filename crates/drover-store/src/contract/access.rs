//! Contract cases of API access: tokens are found by hash until revoked;
//! an idempotency marker is a claim with exactly one winner, replays its
//! stored answer, refuses a different payload, is scoped by tenant,
//! principal and route, and is taken over once expired or stale, and
//! purged once expired.

use std::sync::Arc;

use super::*;
use crate::access::{MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey, NewToken};

fn token(hash_byte: char) -> NewToken {
    NewToken {
        id: Uuid::now_v7(),
        hash: std::iter::repeat_n(hash_byte, 64).collect(),
        role: "operator".into(),
        scope_tenant: Some(tenant_a()),
        enqueue: vec!["mail.*".into(), "report".into()],
        label: "ci".into(),
    }
}

fn key(tenant: Uuid, principal: Uuid, route: &str, k: &str) -> MarkerKey {
    MarkerKey {
        tenant_id: tenant,
        principal,
        route: route.into(),
        key: k.into(),
    }
}

/// A stored token is found by its hash with its grants; a revoked one is
/// not; a second token with the same hash is a conflict.
pub async fn token_found_by_hash_until_revoked(h: &Harness) {
    let t = token('a');
    let row = h.store.token_insert(&t).await.expect("insert");
    assert_eq!(
        (row.id, &row.role, row.scope_tenant),
        (t.id, &t.role, t.scope_tenant)
    );
    let found = h
        .store
        .token_by_hash(&t.hash)
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(found.enqueue, t.enqueue);
    assert_eq!(found.label, "ci");
    assert!(
        h.store
            .token_by_hash(&"b".repeat(64))
            .await
            .expect("lookup")
            .is_none()
    );
    let mut dup = token('a');
    dup.id = Uuid::now_v7();
    assert_kind(
        h.store.token_insert(&dup).await,
        ErrorKind::Conflict,
        "same hash",
    );
    assert!(h.store.token_revoke(t.id).await.expect("revoke"));
    assert!(
        !h.store.token_revoke(t.id).await.expect("second revoke"),
        "already revoked"
    );
    assert!(
        h.store
            .token_by_hash(&t.hash)
            .await
            .expect("lookup")
            .is_none()
    );
    let listed = h.store.token_list().await.expect("list");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].revoked_at.is_some());
}

/// Begin, begin again while in flight, a different payload, finish, and
/// the replay of the stored answer.
pub async fn marker_begin_in_flight_mismatch_replay(h: &Harness) {
    let k = key(tenant_a(), Uuid::now_v7(), "POST /v1/items", "k1");
    let s = h.store.as_ref();
    assert_eq!(
        s.marker_begin(&k, "fp1", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    assert_eq!(
        s.marker_begin(&k, "fp1", LONG, LONG).await.unwrap(),
        MarkerBegin::InFlight
    );
    assert_eq!(
        s.marker_begin(&k, "fp2", LONG, LONG).await.unwrap(),
        MarkerBegin::Mismatch
    );
    s.marker_finish(&k, 201, r#"{"id":"x"}"#).await.unwrap();
    assert_eq!(
        s.marker_begin(&k, "fp1", LONG, LONG).await.unwrap(),
        MarkerBegin::Completed {
            status: 201,
            body: r#"{"id":"x"}"#.into()
        }
    );
    assert_eq!(
        s.marker_begin(&k, "fp2", LONG, LONG).await.unwrap(),
        MarkerBegin::Mismatch
    );
    // A finished marker is not released.
    s.marker_release(&k).await.unwrap();
    assert!(matches!(
        s.marker_begin(&k, "fp1", LONG, LONG).await.unwrap(),
        MarkerBegin::Completed { .. }
    ));
}

/// The same key under another tenant, principal or route is another
/// marker; a released marker can be begun again.
pub async fn marker_scoped_by_tenant_principal_and_route(h: &Harness) {
    let p = Uuid::now_v7();
    let s = h.store.as_ref();
    let base = key(tenant_a(), p, "POST /v1/items", "k");
    assert_eq!(
        s.marker_begin(&base, "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    for other in [
        key(tenant_b(), p, "POST /v1/items", "k"),
        key(tenant_a(), Uuid::now_v7(), "POST /v1/items", "k"),
        key(tenant_a(), p, "POST /v1/items/batch", "k"),
    ] {
        assert_eq!(
            s.marker_begin(&other, "f", LONG, LONG).await.unwrap(),
            MarkerBegin::Started,
            "{other:?}"
        );
    }
    s.marker_release(&base).await.unwrap();
    assert_eq!(
        s.marker_begin(&base, "g", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
}

/// Of many concurrent begins on one key exactly one starts.
pub async fn marker_begin_one_winner_under_concurrency(h: &Harness) {
    let k = Arc::new(key(tenant_a(), Uuid::now_v7(), "POST /v1/items", "race"));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (s, k) = (h.store.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            s.marker_begin(&k, "f", LONG, LONG).await
        }));
    }
    let mut started = 0;
    for t in tasks {
        match t.await.unwrap().expect("begin") {
            MarkerBegin::Started => started += 1,
            MarkerBegin::InFlight => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(started, 1);
}

/// An expired marker is taken over (and a different payload may use the
/// key then); one left in flight past the stale limit is taken over; the
/// purge deletes expired markers only.
pub async fn marker_expired_or_stale_taken_over_and_purged(h: &Harness) {
    let p = Uuid::now_v7();
    let s = h.store.as_ref();
    let short = key(tenant_a(), p, "POST /v1/items", "short");
    let stale = key(tenant_a(), p, "POST /v1/items", "stale");
    let kept = key(tenant_b(), p, "POST /v1/items", "kept");
    assert_eq!(
        s.marker_begin(&short, "f", SHORT, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    s.marker_finish(&short, 200, "{}").await.unwrap();
    assert_eq!(
        s.marker_begin(&stale, "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    assert_eq!(
        s.marker_begin(&kept, "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    h.pass(PAST_SHORT).await;
    assert_eq!(
        s.marker_begin(&stale, "f", LONG, SHORT).await.unwrap(),
        MarkerBegin::Started,
        "stale in flight"
    );
    assert_eq!(
        s.marker_begin(&short, "other", SHORT, LONG).await.unwrap(),
        MarkerBegin::Started,
        "expired"
    );
    h.pass(PAST_SHORT).await;
    assert_eq!(
        s.marker_purge(100).await.unwrap(),
        1,
        "only the expired marker"
    );
    assert_eq!(s.marker_purge(100).await.unwrap(), 0);
    assert_eq!(
        s.marker_begin(&kept, "f", LONG, LONG).await.unwrap(),
        MarkerBegin::InFlight
    );
}

/// The bulk marker calls answer as the single ones would, per claim: two
/// tenants in one call, a key twice in one call (claimed once), a finished
/// marker replayed, another body a mismatch; the bulk finish stores each
/// answer.
pub async fn marker_begin_many_answers_each_claim(h: &Harness) {
    let s = &h.store;
    let p = Uuid::now_v7();
    let claim = |t: Uuid, k: &str, fp: &str| MarkerClaim {
        key: key(t, p, "POST /v1/items", k),
        fingerprint: fp.into(),
    };
    s.marker_begin(
        &key(tenant_a(), p, "POST /v1/items", "done"),
        "f",
        LONG,
        LONG,
    )
    .await
    .unwrap();
    s.marker_finish(&key(tenant_a(), p, "POST /v1/items", "done"), 201, "{}")
        .await
        .unwrap();
    let claims = vec![
        claim(tenant_a(), "one", "f"),
        claim(tenant_b(), "one", "f"),
        claim(tenant_a(), "one", "f"),
        claim(tenant_a(), "done", "f"),
        claim(tenant_a(), "done", "other"),
        claim(tenant_b(), "two", "f"),
    ];
    let got = s.marker_begin_many(&claims, LONG, LONG).await.unwrap();
    assert_eq!(
        got,
        vec![
            MarkerBegin::Started,
            MarkerBegin::Started,
            MarkerBegin::InFlight,
            MarkerBegin::Completed {
                status: 201,
                body: "{}".into()
            },
            MarkerBegin::Mismatch,
            MarkerBegin::Started,
        ]
    );
    // Committed at once: a single begin sees the claims in flight.
    assert_eq!(
        s.marker_begin(&claims[1].key, "f", LONG, LONG)
            .await
            .unwrap(),
        MarkerBegin::InFlight
    );
    let answers = vec![
        MarkerAnswer {
            key: claims[0].key.clone(),
            status: 201,
            body: "a".into(),
        },
        MarkerAnswer {
            key: claims[5].key.clone(),
            status: 400,
            body: "b".into(),
        },
    ];
    s.marker_finish_many(&answers).await.unwrap();
    assert_eq!(
        s.marker_begin_many(
            &[claims[0].clone(), claims[5].clone(), claims[1].clone()],
            LONG,
            LONG
        )
        .await
        .unwrap(),
        vec![
            MarkerBegin::Completed {
                status: 201,
                body: "a".into()
            },
            MarkerBegin::Completed {
                status: 400,
                body: "b".into()
            },
            MarkerBegin::InFlight,
        ]
    );
    assert!(
        s.marker_begin_many(&[], LONG, LONG)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Items with their answers in one call: each input holding a marker has
/// the answer made from its own outcome stored, known answers (requests
/// refused before the store) are stored alongside, and inputs without a
/// marker store nothing.
pub async fn insert_each_answered_stores_each_answer(h: &Harness) {
    let s = &h.store;
    let p = Uuid::now_v7();
    let k = |name: &str| key(tenant_a(), p, "POST /v1/items", name);
    for name in ["one", "taken", "refused"] {
        assert_eq!(
            s.marker_begin(&k(name), "f", LONG, LONG).await.unwrap(),
            MarkerBegin::Started
        );
    }
    let foreign = s
        .item_insert(&NewItem::new("f", serde_json::json!({})).with_tenant(tenant_b()))
        .await
        .unwrap()
        .item
        .id;
    let items = vec![
        NewItem::new("one", serde_json::json!({})).with_tenant(tenant_a()),
        NewItem::new("taken", serde_json::json!({}))
            .with_tenant(tenant_a())
            .with_id(foreign),
        NewItem::new("bare", serde_json::json!({})).with_tenant(tenant_a()),
    ];
    let markers = vec![Some(k("one")), Some(k("taken")), None];
    let known = vec![MarkerAnswer {
        key: k("refused"),
        status: 400,
        body: "refused".into(),
    }];
    let answer = |i: usize, r: &drover_core::Result<drover_core::item::Inserted>| match r {
        Ok(ins) => (201, format!("{i}:{}", ins.item.kind)),
        Err(e) => (409, format!("{i}:{:?}", e.kind())),
    };
    let out = s
        .item_insert_each_answered(&items, &markers, &answer, &known)
        .await
        .unwrap();
    assert_eq!(out.len(), 3);
    assert!(out[0].is_ok() && out[2].is_ok());
    assert!(out[1].as_ref().is_err_and(|e| e.is_conflict()));
    assert_eq!(
        s.marker_begin(&k("one"), "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Completed {
            status: 201,
            body: "0:one".into()
        }
    );
    assert_eq!(
        s.marker_begin(&k("taken"), "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Completed {
            status: 409,
            body: "1:Conflict".into()
        }
    );
    assert_eq!(
        s.marker_begin(&k("refused"), "f", LONG, LONG)
            .await
            .unwrap(),
        MarkerBegin::Completed {
            status: 400,
            body: "refused".into()
        }
    );
    assert!(s.item_get(tenant_a(), items[2].id).await.unwrap().is_some());
}
