//! Contract cases of the listing filters the HTTP API uses: idempotency
//! key, creation-time range, text in the last error, and the cursor that
//! pages through a listing without skipping or repeating an item.

use super::*;

/// Every filter narrows to what it names, and paging by cursor visits
/// each item exactly once, newest first.
pub async fn list_filters_key_time_error_and_cursor(h: &Harness) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut item = new("pager").with_key(format!("k{i}"));
        item.tenant_id = tenant_a();
        ids.push(put(h, item).await.id);
    }
    let by_key = h
        .store
        .item_list(&ListFilter {
            key: Some("k3".into()),
            ..tenant_a_listing(10)
        })
        .await
        .expect("list by key");
    assert_eq!(
        by_key.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![ids[3]]
    );
    lists_by_error_text(h).await;
    let all = h
        .store
        .item_list(&tenant_a_listing(100))
        .await
        .expect("all");
    assert_eq!(all.len(), 6);
    lists_by_creation_time(h, all[0].created_at).await;
    assert_eq!(
        pages_of_two(h).await,
        all.iter().map(|i| i.id).collect::<Vec<_>>(),
        "every item once, in order"
    );
    // Another tenant's listing sees none of them.
    let other = h
        .store
        .item_list(&ListFilter {
            tenant_id: Some(tenant_b()),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("other tenant");
    assert!(other.is_empty());
}

/// Tenant A's listing, at most `limit` items.
fn tenant_a_listing(limit: u32) -> ListFilter {
    ListFilter {
        tenant_id: Some(tenant_a()),
        limit,
        ..Default::default()
    }
}

/// A failure with a recognisable message on one more item: the error
/// filter finds it alone, whatever the case of the text asked for.
async fn lists_by_error_text(h: &Harness) {
    let mut failing = new("pager-fail");
    failing.tenant_id = tenant_a();
    let failing = put(h, failing).await;
    let got = h
        .store
        .item_claim(&ClaimParams {
            kinds: vec!["pager-fail".into()],
            ..claim_params("default", 1, LONG)
        })
        .await
        .expect("claim");
    let r = ClaimRef::of(&got[0]).expect("token");
    h.store
        .item_fail(
            &r,
            &FailParams {
                error: "SMTP Refused: mailbox full".into(),
                retry_delay: LONG,
                fatal: false,
            },
        )
        .await
        .expect("fail");
    let by_err = h
        .store
        .item_list(&ListFilter {
            error_contains: Some("smtp refused".into()),
            ..tenant_a_listing(10)
        })
        .await
        .expect("list by error");
    assert_eq!(
        by_err.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![failing.id]
    );
}

/// Created at or after `newest` and created before it split tenant A's six
/// items between them.
async fn lists_by_creation_time(h: &Harness, newest: DateTime<Utc>) {
    let after = h
        .store
        .item_list(&ListFilter {
            created_after: Some(newest),
            ..tenant_a_listing(100)
        })
        .await
        .expect("after");
    assert!(after.iter().all(|i| i.created_at >= newest) && !after.is_empty());
    let before = h
        .store
        .item_list(&ListFilter {
            created_before: Some(newest),
            ..tenant_a_listing(100)
        })
        .await
        .expect("before");
    assert!(before.iter().all(|i| i.created_at < newest));
    assert_eq!(after.len() + before.len(), 6);
}

/// Tenant A's items, paging by two and following the cursor.
async fn pages_of_two(h: &Harness) -> Vec<Uuid> {
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = h
            .store
            .item_list(&ListFilter {
                after: cursor,
                ..tenant_a_listing(2)
            })
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        let last = page.last().expect("non-empty");
        cursor = Some(crate::ListCursor {
            created_at: last.created_at,
            id: last.id,
        });
        seen.extend(page.iter().map(|i| i.id));
    }
    seen
}

/// An item's flow-control group is stored by every insert path (one, many,
/// each, the outbox row it is relayed from), read back, and filters a
/// listing; an item without one has none.
pub async fn groups_stored_listed_and_carried(h: &Harness) {
    let s = &h.store;
    let grouped = |group: &str| new("grouped").with_tenant(tenant_a()).with_group(group);
    let one = put(h, grouped("customer:1")).await;
    assert_eq!(one.group.as_deref(), Some("customer:1"));
    let many = vec![
        grouped("customer:2"),
        new("grouped").with_tenant(tenant_a()),
    ];
    let results = s.item_insert_many(&many).await.expect("insert many");
    assert!(results.iter().all(|r| *r == InsertResult::Inserted));
    let each = s
        .item_insert_each(&[grouped("customer:1")])
        .await
        .expect("insert each");
    let each = each[0].as_ref().expect("inserted");
    assert_eq!(each.item.group.as_deref(), Some("customer:1"));
    for (item, want) in [(&many[0], Some("customer:2")), (&many[1], None)] {
        let got = s
            .item_get(tenant_a(), item.id)
            .await
            .expect("get")
            .expect("row");
        assert_eq!(got.group.as_deref(), want);
    }
    let listed = |group: &str| {
        let filter = ListFilter {
            group: Some(group.into()),
            ..tenant_a_listing(10)
        };
        async move { s.item_list(&filter).await.expect("list") }
    };
    let mut ids: Vec<Uuid> = listed("customer:1").await.iter().map(|i| i.id).collect();
    ids.sort();
    let mut want = vec![one.id, each.item.id];
    want.sort();
    assert_eq!(ids, want);
    let two = listed("customer:2").await;
    assert_eq!(two.len(), 1);
    assert_eq!(two[0].id, many[0].id);
    assert!(listed("customer:3").await.is_empty());

    let row = crate::outbox::NewOutboxRow::new("work.grouped", json!({"n": 1}))
        .with_group(Some("customer:9".into()));
    let row = crate::outbox::NewOutboxRow {
        tenant_id: tenant_a(),
        ..row
    };
    s.outbox_insert(&row).await.expect("outbox insert");
    let stored = s
        .outbox_get(tenant_a(), row.id)
        .await
        .expect("outbox get")
        .expect("outbox row");
    assert_eq!(stored.group.as_deref(), Some("customer:9"));
    let item = crate::outbox::relayed_item(&stored, "grouped", 1 << 20).expect("relayed item");
    assert_eq!(item.group.as_deref(), Some("customer:9"));
}
