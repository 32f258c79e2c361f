//! The shop: drover's design in one small service, one body of code for
//! PostgreSQL and SQLite.
//!
//! - **An order is one transaction of the service's own** ([`place_order`]):
//!   the order row, a `work.send_receipt` outbox row, an
//!   `event.order_placed` row and the start of the order's checkout saga.
//!   All of it commits, or none of it exists.
//! - **Outbox → relay → handler.** After the commit the worker's relay
//!   enqueues the receipt and appends the event. [`Receipts`] sends the
//!   receipt, recorded in `shop_receipts` and keyed on the order, so a rerun
//!   sends nothing twice.
//! - **A projector with rebuild.** [`CustomerTotals`] keeps orders and
//!   revenue per customer in `shop_customer_totals`. Its checkpoint moves in
//!   the same transaction as its rows; a rebuild empties the table and
//!   replays the log.
//! - **A schedule in a time zone.** `daily-sales` runs at 18:00 Berlin time
//!   and writes the day's totals into `shop_daily_sales` ([`DailySalesReport`]).
//! - **A saga waiting for a signal.** `checkout` reserves the order's stock,
//!   waits for the payment provider's `payment_confirmed` signal
//!   ([`confirm_payment`]) and marks the order paid. A payment that never
//!   comes times out, and the reservation is released.
//!
//! Every statement of the shop's own is one SQL text for both engines
//! (parameters `$1`, `$2` …), run on a [`drover::Tx`] from
//! [`Queue::begin`] or on a projector's [`TxConn`]. Nothing here names an
//! engine: the database URL alone chooses it.

use std::time::Duration;

use async_trait::async_trait;
use drover::events::Event;
use drover::orchestration::{
    Next, Start, StepContext, StepError, Workflow, WorkflowStrategy, Workflows,
};
use drover::periodic::{MisfirePolicy, Schedule};
use drover::projector::{ProjectionTx, Projector, ProjectorStrategy, apply_failed};
use drover::queue::{JobContext, Kind, Principal};
use drover::worker::{Done, Handler, Outcome, ResultExt, Strategy, WorkerBuilder};
use drover::{Queue, TxConn};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The shop's tables, the same text on both engines.
const SCHEMA: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS shop_orders (
        id TEXT PRIMARY KEY,
        customer TEXT NOT NULL,
        cents BIGINT NOT NULL,
        status TEXT NOT NULL,
        saga TEXT NOT NULL,
        placed_on TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS shop_receipts (
        order_id TEXT PRIMARY KEY,
        sent_to TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS shop_customer_totals (
        customer TEXT PRIMARY KEY,
        orders BIGINT NOT NULL,
        cents BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS shop_daily_sales (
        day TEXT PRIMARY KEY,
        orders BIGINT NOT NULL,
        cents BIGINT NOT NULL)",
];

/// The checkout saga's name, as [`Start::new`] names it.
pub const CHECKOUT: &str = "checkout";
/// The signal the payment provider's webhook sends.
pub const PAYMENT_CONFIRMED: &str = "payment_confirmed";
/// How long the saga waits for the payment before it releases the stock.
pub const PAYMENT_TIMEOUT: Duration = Duration::from_secs(3600);
/// The daily report's schedule.
pub const DAILY_SALES: &str = "daily-sales";

/// Opens the shop's database at `url` (`sqlite://shop.db`,
/// `postgres://…`): drover's migrations, the shop's tables, and the
/// checkout saga declared on the queue so a process that only places
/// orders can start it by name.
///
/// # Errors
/// Connection, migration and DDL errors.
pub async fn open(url: &str) -> drover::Result<Queue> {
    let queue = Queue::connect(url).await?;
    queue.migrate().await?;
    let mut tx = queue.begin().await?;
    for ddl in SCHEMA {
        tx.query(ddl).execute().await?;
    }
    tx.commit().await?;
    workflows(queue.clone()).declare(&queue);
    Ok(queue)
}

/// Adds the shop to a worker: its handlers, projector, schedule and saga.
/// The binary hands it to drover's CLI (`drover_cli::run_with`), so
/// `shop worker`, `shop handlers` and `shop schedules` see all of it.
pub fn setup(b: WorkerBuilder) -> WorkerBuilder {
    let queue = b.queue().clone();
    b.handler(Receipts {
        queue: queue.clone(),
    })
    .handler(DailySalesReport {
        queue: queue.clone(),
    })
    .schedule(
        Schedule::new(DAILY_SALES, "0 18 * * *", DailySales {})
            .zone("Europe/Berlin")
            .misfire(MisfirePolicy::Once),
    )
    .projector(CustomerTotals)
    .workflows(workflows(queue))
}

/// The receipt an order owes its customer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReceipt {
    /// The order.
    pub order: Uuid,
    /// Where the receipt goes.
    pub email: String,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "send_receipt";
}

/// What the event log records of an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrderPlaced {
    /// The order.
    pub order: Uuid,
    /// Who placed it.
    pub customer: String,
    /// Its total.
    pub cents: i64,
}

/// The checkout saga's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkout {
    /// The order.
    pub order: Uuid,
    /// Its total.
    pub cents: i64,
}

/// Places an order inside the caller's transaction `tx`: the order row, its
/// receipt (outbox), its `order_placed` event (outbox) and its checkout
/// saga. Returns the order's id. Nothing exists until `tx` commits.
///
/// # Errors
/// Database errors; [`drover::Error::InvalidInput`] when no checkout saga
/// is declared on `queue` ([`open`] and [`setup`] declare it).
pub async fn place_order(
    queue: &Queue,
    tx: &mut TxConn<'_>,
    customer: &str,
    cents: i64,
) -> drover::Result<Uuid> {
    let order = Uuid::now_v7();
    let who = Principal::system();
    // Keyed on the order: a retried checkout meets its own saga.
    let start = Start::new(CHECKOUT, &Checkout { order, cents })?.key(format!("checkout:{order}"));
    let saga = queue.start_in(tx, &start).await?;
    tx.query(
        "INSERT INTO shop_orders (id, customer, cents, status, saga, placed_on)
         VALUES ($1, $2, $3, 'placed', $4, $5)",
    )
    .bind(order.to_string())
    .bind(customer)
    .bind(cents)
    .bind(saga.record.id.to_string())
    .bind(today())
    .execute()
    .await?;
    let receipt = SendReceipt {
        order,
        email: format!("{customer}@example.com"),
    };
    queue.outbox_work_in(tx, &who, &receipt).await?;
    let placed = OrderPlaced {
        order,
        customer: customer.to_owned(),
        cents,
    };
    queue
        .outbox_event_in(tx, &who, "order_placed", &placed)
        .await?;
    Ok(order)
}

/// The payment provider's webhook: signals the order's saga that the
/// payment is confirmed. Keyed on the order, so a resent webhook is
/// harmless.
///
/// # Errors
/// [`drover::Error::NotFound`] for an unknown order; database errors.
pub async fn confirm_payment(queue: &Queue, order: Uuid) -> drover::Result<()> {
    let mut tx = queue.begin().await?;
    let row = tx
        .query("SELECT saga FROM shop_orders WHERE id = $1")
        .bind(order.to_string())
        .fetch_optional()
        .await?;
    tx.rollback().await?;
    let Some(row) = row else {
        return Err(drover::Error::NotFound(format!("order {order}")));
    };
    let saga: String = row.try_get("saga")?;
    let saga = Uuid::parse_str(&saga)
        .map_err(|e| drover::Error::invalid("saga", format!("not an id: {e}")))?;
    queue
        .signal(
            &Principal::system(),
            Uuid::nil(),
            saga,
            PAYMENT_CONFIRMED,
            serde_json::json!({ "order": order }),
            Some(&format!("payment:{order}")),
        )
        .await?;
    Ok(())
}

/// An order's status: `placed`, `reserved`, `paid` or `released`.
///
/// # Errors
/// [`drover::Error::NotFound`] for an unknown order; database errors.
pub async fn order_status(queue: &Queue, order: Uuid) -> drover::Result<String> {
    let mut tx = queue.begin().await?;
    let row = tx
        .query("SELECT status FROM shop_orders WHERE id = $1")
        .bind(order.to_string())
        .fetch_optional()
        .await?;
    tx.rollback().await?;
    match row {
        Some(r) => r.try_get("status"),
        None => Err(drover::Error::NotFound(format!("order {order}"))),
    }
}

/// Today's date (UTC) as the orders and the report spell it.
fn today() -> String {
    chrono::Utc::now().date_naive().to_string()
}

/// Sends receipts: the "mail service" is the `shop_receipts` table, keyed
/// on the order.
pub struct Receipts {
    queue: Queue,
}

impl Handler for Receipts {
    type Job = SendReceipt;
    const STRATEGY: Strategy = Strategy {
        idempotency: "one receipt per order: the insert is keyed on the order id",
        retry: "default backoff and budget",
        checkpoint: "none: one insert",
        recovery: "a crashed send is swept after its lease and sent again (keyed: once)",
    };

    async fn handle(&self, _cx: &JobContext, job: SendReceipt) -> Outcome {
        let mut tx = self.queue.begin().await.retryable()?;
        tx.query(
            "INSERT INTO shop_receipts (order_id, sent_to) VALUES ($1, $2)
             ON CONFLICT (order_id) DO NOTHING",
        )
        .bind(job.order.to_string())
        .bind(job.email)
        .execute()
        .await
        .retryable()?;
        tx.commit().await.retryable()?;
        Ok(Done::Completed)
    }
}

/// The daily report's job (the schedule enqueues one per tick).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DailySales {}

impl Kind for DailySales {
    const NAME: &'static str = "report.daily_sales";
}

/// Writes the day's order count and revenue into `shop_daily_sales`.
pub struct DailySalesReport {
    queue: Queue,
}

impl Handler for DailySalesReport {
    type Job = DailySales;
    const STRATEGY: Strategy = Strategy {
        idempotency: "an upsert of the day's row: a rerun writes the same totals",
        retry: "default backoff and budget",
        checkpoint: "none: one statement",
        recovery: "a crashed run is swept after its lease and run again",
    };

    async fn handle(&self, _cx: &JobContext, _job: DailySales) -> Outcome {
        let mut tx = self.queue.begin().await.retryable()?;
        tx.query(
            "INSERT INTO shop_daily_sales (day, orders, cents)
             SELECT $1, COUNT(*), CAST(COALESCE(SUM(cents), 0) AS BIGINT) FROM shop_orders WHERE placed_on = $1
             ON CONFLICT (day) DO UPDATE SET orders = excluded.orders, cents = excluded.cents",
        )
        .bind(today())
        .execute()
        .await
        .retryable()?;
        tx.commit().await.retryable()?;
        Ok(Done::Completed)
    }
}

/// Orders and revenue per customer, projected from `order_placed`.
pub struct CustomerTotals;

#[async_trait]
impl Projector for CustomerTotals {
    fn name(&self) -> &str {
        "customer_totals"
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
            rebuild: "reset empties shop_customer_totals; the log replays from position 1",
            lag: "a reader may miss orders placed in the last relay and apply round",
        }
    }

    async fn apply(&self, event: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let placed: OrderPlaced = serde_json::from_value(event.payload.clone())
            .map_err(|e| apply_failed(format!("not an order_placed payload: {e}")))?;
        let mut conn = projection_conn(tx)?;
        conn.query(
            "INSERT INTO shop_customer_totals (customer, orders, cents) VALUES ($1, 1, $2)
             ON CONFLICT (customer) DO UPDATE
             SET orders = shop_customer_totals.orders + 1,
                 cents = shop_customer_totals.cents + excluded.cents",
        )
        .bind(placed.customer)
        .bind(placed.cents)
        .execute()
        .await?;
        Ok(())
    }

    async fn reset(&self, _tenant: Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let mut conn = projection_conn(tx)?;
        conn.query("DELETE FROM shop_customer_totals")
            .execute()
            .await?;
        Ok(())
    }
}

/// The projection's transaction as the shop's own code takes it. The memory
/// store shares no transaction with a projection: the shop needs a
/// database.
fn projection_conn<'a>(tx: &'a mut ProjectionTx<'_>) -> drover::Result<TxConn<'a>> {
    tx.conn()
        .ok_or_else(|| apply_failed("the shop keeps its tables in the queue's database"))
}

/// The checkout saga.
pub fn checkout(queue: Queue) -> Workflow<Checkout> {
    let strategy = WorkflowStrategy {
        compensation: "release the reservation when the payment never comes",
        resume: "payment_confirmed wakes it; after an hour the timeout step fails it into compensation",
    };
    let q = queue.clone();
    let reserve = move |_cx: StepContext, s: Checkout| {
        let q = q.clone();
        async move {
            set_status(&q, s.order, "placed", "reserved").await?;
            Ok(Next::WaitSignal {
                name: PAYMENT_CONFIRMED,
                step: "mark_paid",
                timeout: PAYMENT_TIMEOUT,
                on_timeout: "payment_timed_out",
                state: s,
            })
        }
    };
    let q = queue.clone();
    let mark_paid = move |_cx: StepContext, s: Checkout| {
        let q = q.clone();
        async move {
            set_status(&q, s.order, "reserved", "paid").await?;
            Ok(Next::complete(serde_json::json!({ "paid": s.order }), s))
        }
    };
    let timed_out = |_cx: StepContext, _s: Checkout| async move {
        Err::<Next<Checkout>, _>(StepError::fatal("the payment was never confirmed"))
    };
    let q = queue;
    let release = move |_cx: StepContext, s: Checkout| {
        let q = q.clone();
        async move { set_status(&q, s.order, "reserved", "released").await }
    };
    Workflow::new(CHECKOUT, strategy)
        .step("reserve", reserve)
        .step("mark_paid", mark_paid)
        .step("payment_timed_out", timed_out)
        .compensate("reserve", release)
}

/// The shop's workflows (one: [`checkout`]).
pub fn workflows(queue: Queue) -> Workflows {
    Workflows::new().with(checkout(queue))
}

/// Moves an order from `from` to `to`. Guarded on `from`, so a step that
/// runs twice (a crash between its write and its transition) writes once.
async fn set_status(queue: &Queue, order: Uuid, from: &str, to: &str) -> Result<(), StepError> {
    let write = async {
        let mut tx = queue.begin().await?;
        tx.query("UPDATE shop_orders SET status = $1 WHERE id = $2 AND status = $3")
            .bind(to)
            .bind(order.to_string())
            .bind(from)
            .execute()
            .await?;
        tx.commit().await
    };
    write.await.map_err(StepError::retry)
}
