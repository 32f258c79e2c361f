//! An order service on the outbox: each order is one transaction that
//! writes the order row, a `work.send_receipt` row and an
//! `event.order_placed` row. After the commit the worker's relay enqueues
//! the receipt (under the outbox row's id) and appends the event; the
//! `SendReceipt` handler runs; a projector keeps orders per customer, its
//! checkpoint moving in the same transaction as its table.
//!
//! Runs on the embedded default (a temporary SQLite file):
//!
//! ```text
//! cargo run -p drover --example order_service
//! ```
//!
//! A fourth order is rolled back: its receipt is never sent and its event
//! never projected.

#![allow(clippy::print_stdout, clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use drover::events::Event;
use drover::projector::{ProjectionTx, Projector, ProjectorStrategy, apply_failed};
use drover::queue::{JobContext, Kind, Principal};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{Queue, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The follow-up work of an order.
#[derive(Debug, Serialize, Deserialize)]
struct SendReceipt {
    order: Uuid,
    email: String,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "send_receipt";
}

/// What the log records about an order.
#[derive(Debug, Serialize, Deserialize)]
struct OrderPlaced {
    order: Uuid,
    customer: String,
    cents: i64,
}

/// Stands in for the mail service: a receipt per order, keyed on the
/// item's id (the outbox row's id), so a rerun sends nothing twice.
struct Mailer {
    sent: Arc<Mutex<Vec<Uuid>>>,
}

impl Handler for Mailer {
    type Job = SendReceipt;
    const STRATEGY: Strategy = Strategy {
        idempotency: "the mail service is called with the item's id (the outbox row's id) as its key",
        retry: "the queue's default backoff and budget",
        checkpoint: "none: one call",
        recovery: "a crash before completion reruns the call, which the key makes a no-op",
    };

    async fn handle(&self, cx: &JobContext, job: SendReceipt) -> Outcome {
        let mut sent = self.sent.lock().unwrap();
        if !sent.contains(&cx.id()) {
            sent.push(cx.id());
            println!("  receipt for order {} sent to {}", job.order, job.email);
        }
        Ok(Done::Completed)
    }
}

/// Orders and revenue per customer, in the service's own database.
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
            idempotency: "never replayed: the checkpoint moves in the apply's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the rows, in the same database",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset deletes the tenant's rows; the log replays from position 1",
            lag: "a reader may miss orders placed in the last relay and apply round",
        }
    }

    async fn apply(&self, event: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let placed: OrderPlaced = serde_json::from_value(event.payload.clone())
            .map_err(|e| apply_failed(format!("not an order_placed payload: {e}")))?;
        let conn = tx
            .sqlite()
            .ok_or_else(|| apply_failed("this example runs on SQLite"))?;
        sqlx::query(
            "INSERT INTO orders_per_customer (customer, orders, cents) VALUES (?1, 1, ?2) \
             ON CONFLICT (customer) DO UPDATE SET orders = orders + 1, cents = cents + ?2",
        )
        .bind(&placed.customer)
        .bind(placed.cents)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    async fn reset(&self, _tenant: Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let conn = tx
            .sqlite()
            .ok_or_else(|| apply_failed("this example runs on SQLite"))?;
        sqlx::query("DELETE FROM orders_per_customer")
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// One order: the order row, the receipt's outbox row and the event's, in
/// one transaction that commits or (for `commit = false`) rolls back.
async fn place(store: &SqliteStore, queue: &Queue, customer: &str, cents: i64, commit: bool) {
    let order = Uuid::now_v7();
    let who = Principal::system();
    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    sqlx::query("INSERT INTO orders (id, customer, cents) VALUES (?1, ?2, ?3)")
        .bind(order)
        .bind(customer)
        .bind(cents)
        .execute(&mut *tx)
        .await
        .unwrap();
    let receipt = SendReceipt {
        order,
        email: format!("{customer}@example.com"),
    };
    queue
        .outbox_work_in(&mut *tx, &who, &receipt)
        .await
        .unwrap();
    let placed = OrderPlaced {
        order,
        customer: customer.into(),
        cents,
    };
    queue
        .outbox_event_in(&mut *tx, &who, "order_placed", &placed)
        .await
        .unwrap();
    if commit {
        tx.commit().await.unwrap();
        // SQLite has no NOTIFY: wake this process's relay now.
        queue.wake_outbox();
        println!("order {order} by {customer} ({cents} cents) committed");
    } else {
        tx.rollback().await.unwrap();
        println!("order {order} by {customer} rolled back");
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("orders.db").display());
    let store = SqliteStore::open(&url, SqliteOptions::default())
        .await
        .unwrap();
    let queue = Queue::new(Arc::new(store.clone()));
    queue.migrate().await.unwrap();
    for ddl in [
        "CREATE TABLE orders (id BLOB PRIMARY KEY, customer TEXT NOT NULL, cents INTEGER NOT NULL)",
        "CREATE TABLE orders_per_customer (customer TEXT PRIMARY KEY, orders INTEGER NOT NULL, cents INTEGER NOT NULL)",
    ] {
        sqlx::query(ddl).execute(store.writer()).await.unwrap();
    }

    let sent = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::builder(queue.clone())
        .settings(WorkerSettings {
            metrics_addr: None,
            heartbeat_cron: None,
            ..WorkerSettings::default()
        })
        .handler(Mailer { sent: sent.clone() })
        .projector(OrdersPerCustomer)
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();

    place(&store, &queue, "ada", 1200, true).await;
    place(&store, &queue, "grace", 800, true).await;
    place(&store, &queue, "ada", 500, true).await;
    place(&store, &queue, "linus", 9900, false).await;

    // Wait for three receipts and a projection of three orders.
    let projected = || async {
        sqlx::query_scalar::<_, i64>("SELECT coalesce(sum(orders), 0) FROM orders_per_customer")
            .fetch_one(store.writer())
            .await
            .unwrap()
    };
    for _ in 0..600 {
        if sent.lock().unwrap().len() == 3 && projected().await == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.shutdown().await;

    let rows: Vec<(String, i64, i64)> =
        sqlx::query_as("SELECT customer, orders, cents FROM orders_per_customer ORDER BY customer")
            .fetch_all(store.writer())
            .await
            .unwrap();
    println!("orders per customer:");
    for (customer, orders, cents) in &rows {
        println!("  {customer}: {orders} orders, {cents} cents");
    }
    let stats = queue.store().outbox_stats().await.unwrap();
    println!(
        "outbox: {} done, {} pending, {} failed; receipts sent: {}",
        stats.done,
        stats.pending,
        stats.failed,
        sent.lock().unwrap().len()
    );
    assert_eq!(
        sent.lock().unwrap().len(),
        3,
        "one receipt per committed order"
    );
    assert_eq!(
        rows.len(),
        2,
        "ada and grace; the rolled-back order is nowhere"
    );
}
