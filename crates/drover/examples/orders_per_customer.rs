//! The projector half of the order-service example: `order_placed` events
//! in the log (appended here directly; in the service, by the outbox relay
//! from the rows the order's transaction wrote), and a projector keeping
//! orders per customer in the same SQLite file, exactly once.
//!
//! `cargo run -p drover --example orders_per_customer`

#![allow(clippy::print_stdout, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use drover::Store;
use drover::events::{Event, NewEvent};
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use serde_json::json;
use uuid::Uuid;

struct OrdersPerCustomer;

#[async_trait]
impl Projector for OrdersPerCustomer {
    fn name(&self) -> &str {
        "orders_per_customer"
    }
    fn topics(&self) -> Vec<String> {
        vec!["order_placed".into()]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "never replayed: the count moves in the checkpoint's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the counts, in the same database",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset deletes the tenant's counts; the log is replayed",
            lag: "counts trail the log by drover_projector_lag_seconds",
        }
    }
    async fn apply(&self, e: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let conn = tx
            .sqlite()
            .ok_or_else(|| drover::projector::apply_failed("this example runs on SQLite"))?;
        sqlx::query(
            "INSERT INTO orders_per_customer (tenant_id, customer, orders) VALUES (?1, ?2, 1) \
             ON CONFLICT (tenant_id, customer) DO UPDATE SET orders = orders + 1",
        )
        .bind(e.tenant)
        .bind(e.payload["customer"].as_str().unwrap_or("unknown"))
        .execute(conn)
        .await?;
        Ok(())
    }
    async fn reset(&self, tenant: Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let conn = tx
            .sqlite()
            .ok_or_else(|| drover::projector::apply_failed("this example runs on SQLite"))?;
        sqlx::query("DELETE FROM orders_per_customer WHERE tenant_id = ?1")
            .bind(tenant)
            .execute(conn)
            .await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let store = SqliteStore::open("sqlite::memory:", SqliteOptions::default()).await?;
    store.migrate().await?;
    sqlx::query(
        "CREATE TABLE orders_per_customer (tenant_id BLOB NOT NULL, customer TEXT NOT NULL, \
         orders INTEGER NOT NULL, PRIMARY KEY (tenant_id, customer))",
    )
    .execute(store.writer())
    .await?;
    let sqlite = store.clone();
    let store: Arc<dyn Store> = Arc::new(store);
    for (order, customer) in [(1, "ada"), (2, "grace"), (3, "ada")] {
        store
            .event_append(&NewEvent::new(
                "order_placed",
                json!({ "order": order, "customer": customer }),
            ))
            .await?;
    }
    let runner = ProjectorRunner::new(
        store.clone(),
        Arc::new(OrdersPerCustomer),
        ProjectorConfig::default(),
    )?;
    let report = runner.run_once().await?;
    println!(
        "applied {} events; {} behind",
        report.applied, report.behind_events
    );
    for s in drover::projector::status(store.as_ref(), "orders_per_customer").await? {
        println!(
            "tenant {}: checkpoint {} of {}",
            s.tenant, s.position, s.head
        );
    }
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT customer, orders FROM orders_per_customer ORDER BY customer")
            .fetch_all(sqlite.writer())
            .await?;
    for (customer, orders) in counts {
        println!("{customer}: {orders} orders");
    }
    Ok(())
}
