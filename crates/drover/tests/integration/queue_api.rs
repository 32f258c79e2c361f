//! The queue API over the memory store: stamping, permissions, bad input,
//! the tenant directory.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use drover::queue::{Kind, Principal, Queue, TenantDirectory};
use drover::store::ListFilter;
use drover::{ErrorKind, InsertResult, NewItem, Status};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Serialize, Deserialize)]
struct SendWelcome {
    user_id: u64,
}

impl Kind for SendWelcome {
    const NAME: &'static str = "send_welcome";
    const PERMISSION: &'static str = "mail.send";
    const LANE: &'static str = "mail";
}

async fn count(q: &Queue) -> usize {
    q.list(&ListFilter {
        limit: 1000,
        ..Default::default()
    })
    .await
    .expect("list")
    .len()
}

#[tokio::test]
async fn same_key_three_times_gives_one_id() {
    let q = Queue::memory();
    let a = q
        .enqueue(SendWelcome { user_id: 1 })
        .key("welcome:1")
        .await
        .expect("1");
    let b = q
        .enqueue(SendWelcome { user_id: 1 })
        .key("welcome:1")
        .await
        .expect("2");
    let c = q
        .enqueue(SendWelcome { user_id: 1 })
        .key("welcome:1")
        .await
        .expect("3");
    assert_eq!(a.result, InsertResult::Inserted);
    assert_eq!(b.result, InsertResult::KeyExists);
    assert_eq!(c.result, InsertResult::KeyExists);
    assert_eq!(a.item.id, b.item.id);
    assert_eq!(a.item.id, c.item.id);
    assert_eq!(a.item.lane, "mail");
    assert_eq!(count(&q).await, 1);
}

#[tokio::test]
async fn enqueue_without_permission_is_forbidden_and_writes_nothing() {
    let q = Queue::memory();
    let p = Principal::new(Uuid::from_u128(1), Uuid::from_u128(2), ["other"]);
    let err = q
        .enqueue(SendWelcome { user_id: 1 })
        .principal(p)
        .await
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Forbidden);
    assert_eq!(count(&q).await, 0);
}

#[tokio::test]
async fn enqueue_stamps_the_principal() {
    let q = Queue::memory();
    let actor = Uuid::from_u128(1);
    let tenant = Uuid::from_u128(2);
    let p = Principal::new(actor, tenant, ["mail.send"])
        .with_request("req-9")
        .with_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    let out = q
        .enqueue(SendWelcome { user_id: 1 })
        .principal(p)
        .await
        .expect("enqueue");
    assert_eq!(out.item.created_by, actor);
    assert_eq!(out.item.tenant_id, tenant);
    assert_eq!(out.item.request_id.as_deref(), Some("req-9"));
    assert_eq!(out.item.status, Status::Pending);
    // Another tenant's principal cannot target this tenant.
    let intruder = Principal::new(actor, Uuid::from_u128(3), ["mail.send"]);
    let err = q
        .enqueue(SendWelcome { user_id: 1 })
        .principal(intruder)
        .tenant(tenant)
        .await
        .expect_err("cross-tenant enqueue refused");
    assert_eq!(err.kind(), ErrorKind::Forbidden);
}

#[tokio::test]
async fn bad_input_is_typed_and_writes_nothing() {
    let q = Queue::memory();
    let sys = Principal::system();
    let cases: Vec<(NewItem, &str)> = vec![
        (NewItem::new("", json!({})), "kind"),
        (NewItem::new("a".repeat(129), json!({})), "kind"),
        (NewItem::new("Bad Kind", json!({})), "kind"),
        (NewItem::new("k'; drop table items;--", json!({})), "kind"),
        (NewItem::new("ok", json!({})).with_lane("UPPER"), "lane"),
        (
            NewItem::new("ok", json!({})).with_lane("a".repeat(65)),
            "lane",
        ),
        (NewItem::new("ok", json!({})).with_lane("la%ne"), "lane"),
        (
            NewItem::new("ok", json!({"s": "x".repeat(300 * 1024)})),
            "payload",
        ),
        (NewItem::new("ok", json!({"s": "nul\u{0}"})), "payload"),
        (
            NewItem::new("ok", json!({})).with_max_attempts(0),
            "max_attempts",
        ),
    ];
    for (item, field) in cases {
        let err = q.enqueue_item(&sys, item).await.expect_err("refused");
        match err {
            drover::Error::InvalidInput { field: f, .. } => assert_eq!(f, field),
            other => panic!("expected InvalidInput on {field}, got {other}"),
        }
    }
    let batch = vec![
        NewItem::new("ok", json!({})),
        NewItem::new("BAD", json!({})),
    ];
    let err = q
        .enqueue_many(&sys, batch)
        .await
        .expect_err("batch refused");
    assert!(err.to_string().contains("item 1"), "{err}");
    assert_eq!(count(&q).await, 0);
}

struct Directory {
    gone: Uuid,
    left: Uuid,
}

#[async_trait]
impl TenantDirectory for Directory {
    async fn is_live(&self, tenant: Uuid) -> drover::Result<bool> {
        Ok(tenant != self.gone)
    }
    async fn is_member(&self, _tenant: Uuid, actor: Uuid) -> drover::Result<bool> {
        Ok(actor != self.left)
    }
}

#[tokio::test]
async fn gone_tenant_is_orphaned_and_a_departed_creators_item_runs_as_the_service() {
    let gone = Uuid::from_u128(10);
    let left = Uuid::from_u128(11);
    let member = Uuid::from_u128(13);
    let tenant = Uuid::from_u128(12);
    let q = Queue::memory().with_tenants(Arc::new(Directory { gone, left }));
    let sys = Principal::system();
    let orphan = q
        .enqueue_item(&sys, NewItem::new("a", json!({})).with_tenant(gone))
        .await
        .expect("enqueue");
    // A refund queued by an employee who then left must still run.
    let by_left = q
        .enqueue_item(
            &Principal::new(left, tenant, ["*"]),
            NewItem::new("a", json!({})),
        )
        .await
        .expect("enqueue");
    let by_member = q
        .enqueue_item(
            &Principal::new(member, tenant, ["*"]),
            NewItem::new("a", json!({})),
        )
        .await
        .expect("enqueue");
    let by_system = q
        .enqueue_item(&sys, NewItem::new("a", json!({})))
        .await
        .expect("enqueue");
    let batch = q
        .claim("default", &[], "w", Duration::from_secs(30), 10)
        .await
        .expect("claim");
    assert_eq!(batch.orphaned, 1);
    assert_eq!(batch.creator_departed, 1);
    assert_eq!(
        batch.items.len(),
        3,
        "only the gone tenant's item is held back"
    );
    let cx = |id: Uuid| {
        batch
            .items
            .iter()
            .find(|c| c.id() == id)
            .unwrap_or_else(|| panic!("{id} handed out"))
    };
    let l = cx(by_left.item.id);
    assert!(l.is_service(), "departed creator: the service context");
    assert_eq!(l.actor(), Uuid::nil(), "never the departed member");
    assert_eq!(l.created_by(), left, "who queued it is still known");
    assert_eq!(l.tenant(), tenant);
    let m = cx(by_member.item.id);
    assert!(!m.is_service());
    assert_eq!(m.actor(), member, "a member's item runs for the member");
    let s = cx(by_system.item.id);
    assert!(s.is_service(), "the nil creator: the service context");
    assert_eq!(s.actor(), Uuid::nil());
    let o = q.get(gone, orphan.item.id).await.expect("get");
    assert_eq!(o.status, Status::Failed);
    assert_eq!(o.attempts, 0, "orphaning spends no attempt");
    assert!(q.audit(gone, o.id).await.expect("audit").is_empty());
    let l = q.get(tenant, by_left.item.id).await.expect("get");
    assert_eq!(l.status, Status::Claimed);
}

/// A directory that answers for one tenant and fails for another.
struct Flaky {
    broken: Uuid,
}

#[async_trait]
impl TenantDirectory for Flaky {
    async fn is_live(&self, tenant: Uuid) -> drover::Result<bool> {
        if tenant == self.broken {
            return Err(drover::Error::Unavailable(drover::error::Opaque::msg(
                "directory down",
            )));
        }
        Ok(true)
    }
    async fn is_member(&self, _tenant: Uuid, _actor: Uuid) -> drover::Result<bool> {
        Ok(true)
    }
}

#[tokio::test]
async fn a_failing_tenant_directory_releases_the_claimed_batch_without_an_attempt() {
    let broken = Uuid::from_u128(20);
    let fine = Uuid::from_u128(21);
    let q = Queue::memory().with_tenants(Arc::new(Flaky { broken }));
    let sys = Principal::system();
    let mut ids = Vec::new();
    // The fine tenant's item is claimed first (checked fine), the broken
    // tenant's second, and a third after it is never checked.
    for tenant in [fine, broken, fine] {
        let out = q
            .enqueue_item(&sys, NewItem::new("a", json!({})).with_tenant(tenant))
            .await
            .expect("enqueue");
        ids.push((tenant, out.item.id));
    }
    let err = q
        .claim("default", &[], "w", Duration::from_secs(30), 10)
        .await
        .expect_err("the directory's error is the claim's");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    for (tenant, id) in ids {
        let item = q.get(tenant, id).await.expect("get");
        assert_eq!(item.status, Status::Pending, "handed back now: {item:?}");
        assert!(item.claim_token.is_none());
        assert_eq!(item.attempts, 0, "no attempt spent");
        assert_eq!(item.claim_seq, 1, "it was claimed once");
    }
}

#[tokio::test]
async fn claim_builds_the_handler_context() {
    let q = Queue::memory();
    q.enqueue(SendWelcome { user_id: 5 })
        .await
        .expect("enqueue");
    let batch = q
        .claim(
            "mail",
            &["send_welcome".into()],
            "w",
            Duration::from_secs(30),
            10,
        )
        .await
        .expect("claim");
    let cx = &batch.items[0];
    assert_eq!(cx.kind(), "send_welcome");
    assert_eq!(cx.attempt(), 1);
    assert_eq!(cx.fencing_token(), 1);
    assert!(!cx.is_cancelled());
    let out = q.fail(cx, "smtp down", false).await.expect("fail");
    assert!(matches!(out, drover::store::FailOutcome::Requeued { .. }));
    assert_eq!(
        q.complete(cx).await.expect_err("stale").kind(),
        ErrorKind::Conflict
    );
}
