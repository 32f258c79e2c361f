//! Contract cases of API access: tokens are found by hash until revoked;
//! an idempotency marker is a claim with exactly one winner, replays its
//! stored answer, refuses a different payload, is scoped by tenant,
//! principal and route, and is taken over once expired or stale, and
//! purged once expired.

use std::sync::Arc;

use super::*;
use crate::access::{Claimed, MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey, NewToken};

fn token(hash_byte: char) -> NewToken {
    NewToken {
        id: Uuid::now_v7(),
        hash: std::iter::repeat_n(hash_byte, 64).collect(),
        role: "operator".into(),
        scope_tenant: Some(tenant_a()),
        enqueue: vec!["mail.*".into(), "report".into()],
        label: "ci".into(),
        work: vec![],
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

/// A worker token keeps its work grants through insert, lookup and list;
/// grants on any other role are refused by the schema (memory keeps no
/// schema: the HTTP layer refuses them before the store on every backend).
pub async fn worker_token_keeps_its_work_grants(h: &Harness) {
    let mut t = token('c');
    t.role = "worker".into();
    t.scope_tenant = None;
    t.enqueue = vec![];
    t.work = vec!["mail:mail.*".into(), "*:report".into()];
    let row = h.store.token_insert(&t).await.expect("insert");
    assert_eq!((row.role.as_str(), &row.work), ("worker", &t.work));
    let found = h
        .store
        .token_by_hash(&t.hash)
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(found.work, t.work);
    let listed = h.store.token_list().await.expect("list");
    assert_eq!(listed[0].work, t.work);
    let plain = h
        .store
        .token_insert(&token('d'))
        .await
        .expect("an operator");
    assert!(plain.work.is_empty());
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

/// A gathered write: each input's marker is claimed, the inputs that
/// started (or hold none) are inserted, and the answers the caller makes
/// from the outcomes, given back as data, are stored in their markers at
/// commit. A marker answered before settles its input (nothing written);
/// an input refused before the store stores the answer made from its
/// error; an input without a marker stores nothing; a started marker given
/// no answer is released, so a retry runs again.
pub async fn gathered_write_stores_each_answer(h: &Harness) {
    let s = &h.store;
    let p = Uuid::now_v7();
    let k = |name: &str| key(tenant_a(), p, "POST /v1/items", name);
    let claim = |name: &str| {
        Some(MarkerClaim {
            key: k(name),
            fingerprint: "f".into(),
        })
    };
    assert_eq!(
        s.marker_begin(&k("done"), "f", LONG, LONG).await.unwrap(),
        MarkerBegin::Started
    );
    s.marker_finish(&k("done"), 201, "before").await.unwrap();
    let foreign = s
        .item_insert(&NewItem::new("f", serde_json::json!({})).with_tenant(tenant_b()))
        .await
        .unwrap()
        .item
        .id;
    let new = |kind: &str| NewItem::new(kind, serde_json::json!({})).with_tenant(tenant_a());
    let prepared = vec![
        Ok(new("one")),
        Ok(new("taken").with_id(foreign)),
        Err(drover_core::Error::invalid("kind", "refused")),
        Ok(new("bare")),
        Ok(new("done")),
        Ok(new("unanswered")),
    ];
    let claims = vec![
        claim("one"),
        claim("taken"),
        claim("refused"),
        None,
        claim("done"),
        claim("unanswered"),
    ];
    let w = s
        .item_insert_each_claimed(&claims, prepared, LONG, LONG)
        .await
        .unwrap();
    let answers: Vec<Option<(u16, String)>> = w
        .outcomes()
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            _ if i == 5 => None,
            Claimed::Written(Ok(ins)) => Some((201, format!("{i}:{}", ins.item.kind))),
            Claimed::Written(Err(e)) => Some((409, format!("{i}:{:?}", e.kind()))),
            Claimed::Settled(_) => None,
        })
        .collect();
    let out = w.commit(&answers).await.unwrap();
    assert_eq!(out.len(), 6);
    let bare = match &out[3] {
        Claimed::Written(Ok(ins)) => ins.item.id,
        other => panic!("the keyless input is written: {other:?}"),
    };
    assert!(matches!(&out[0], Claimed::Written(Ok(_))), "{out:?}");
    assert!(
        matches!(&out[1], Claimed::Written(Err(e)) if e.is_conflict()),
        "{out:?}"
    );
    assert!(
        matches!(&out[4], Claimed::Settled(MarkerBegin::Completed { status: 201, body }) if body == "before"),
        "{out:?}"
    );
    let stored = |status: u16, body: &str| MarkerBegin::Completed {
        status,
        body: body.into(),
    };
    for (name, want) in [
        ("one", stored(201, "0:one")),
        ("taken", stored(409, "1:Conflict")),
        ("refused", stored(409, "2:InvalidInput")),
        ("done", stored(201, "before")),
        ("unanswered", MarkerBegin::Started),
    ] {
        assert_eq!(
            s.marker_begin(&k(name), "f", LONG, LONG).await.unwrap(),
            want,
            "{name}"
        );
    }
    assert!(s.item_get(tenant_a(), bare).await.unwrap().is_some());
    assert_eq!(
        s.item_list(&crate::ListFilter {
            tenant_id: Some(tenant_a()),
            kind: Some("done".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .len(),
        0,
        "an input its marker settles is not written"
    );
}
