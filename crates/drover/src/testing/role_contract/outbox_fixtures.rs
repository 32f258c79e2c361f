//! What the outbox contract cases share (`outbox` and `outbox_rules`):
//! the rows they write, the relay they run, and how they write and read
//! through a backend's harness. Kept apart so the two case files import it
//! and never each other.

use serde_json::json;
use uuid::Uuid;

use crate::outbox::{NewOutboxRow, Relay, RelayConfig};
use crate::queue::Queue;
use crate::store::ListFilter;
use crate::store::contract::{Harness, LONG};

pub(super) const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

pub(super) fn work_row(tenant: Uuid, payload: serde_json::Value) -> NewOutboxRow {
    NewOutboxRow {
        tenant_id: tenant,
        actor: Uuid::from_u128(0xAC7),
        request_id: Some("req-1".into()),
        traceparent: Some(TRACE.into()),
        ..NewOutboxRow::new("work.send_receipt", payload)
    }
}

pub(super) fn event_row(tenant: Uuid, n: u64) -> NewOutboxRow {
    NewOutboxRow {
        tenant_id: tenant,
        actor: Uuid::from_u128(0xAC7),
        ..NewOutboxRow::new("event.order_placed", json!({"n": n}))
    }
}

pub(super) fn relay(h: &Harness, config: RelayConfig) -> Relay {
    Relay::new(Queue::new(h.store.clone()), config).unwrap()
}

pub(super) fn quick() -> RelayConfig {
    RelayConfig {
        lease: LONG,
        ..RelayConfig::default()
    }
}

/// Writes through the caller's transaction where the backend has one.
pub(super) async fn write(h: &Harness, row: &NewOutboxRow) {
    match &h.outbox_in {
        Some(f) => f(row.clone(), true).await.unwrap(),
        None => h.store.outbox_insert(row).await.unwrap(),
    }
}

pub(super) async fn items_of(h: &Harness, tenant: Uuid) -> Vec<crate::item::Item> {
    h.store
        .item_list(&ListFilter {
            tenant_id: Some(tenant),
            limit: 100_000,
            ..ListFilter::default()
        })
        .await
        .unwrap()
}
