//! The shop keeps each of its promises, with one body of code on SQLite and
//! on PostgreSQL: an order is all or nothing; each committed order gets one
//! receipt and one line in the totals; the saga waits for the payment and
//! marks the order paid; a rebuild gives the same totals; the schedule's
//! report counts the day's orders. And the shop's binary is drover's CLI
//! with the shop in it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::future::Future;
use std::process::Command;
use std::time::Duration;

use drover::Queue;
use drover::worker::{Worker, WorkerSettings};
use sqlx::Connection;
use uuid::Uuid;

/// How long a promise may take to be kept before the test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `check` holds, reading rows every few milliseconds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not kept within {PATIENCE:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One number from the shop's tables.
async fn count(queue: &Queue, sql: &str) -> i64 {
    let mut tx = queue.begin().await.unwrap();
    let n: i64 = tx
        .query(sql)
        .fetch_one()
        .await
        .unwrap()
        .try_get(0_usize)
        .unwrap();
    tx.rollback().await.unwrap();
    n
}

/// The projected totals, by customer.
async fn totals(queue: &Queue) -> Vec<(String, i64, i64)> {
    let mut tx = queue.begin().await.unwrap();
    let rows = tx
        .query("SELECT customer, orders, cents FROM shop_customer_totals ORDER BY customer")
        .fetch_all()
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    rows.iter()
        .map(|r| {
            (
                r.try_get("customer").unwrap(),
                r.try_get("orders").unwrap(),
                r.try_get("cents").unwrap(),
            )
        })
        .collect()
}

async fn status(queue: &Queue, order: Uuid) -> String {
    shop::order_status(queue, order).await.unwrap()
}

/// The whole shop against the database at `url`.
async fn shop_keeps_its_promises(url: &str) {
    let queue = shop::open(url).await.unwrap();
    let worker = shop::setup(Worker::builder(queue.clone()))
        .settings(WorkerSettings {
            metrics_addr: None,
            heartbeat_cron: None,
            poll_interval: Duration::from_millis(100),
            sweep_interval: Duration::from_millis(200),
            ..WorkerSettings::default()
        })
        .build()
        .unwrap();
    let scheduler = worker
        .scheduler()
        .expect("the daily report's schedule")
        .clone();
    let worker = worker.start().await.unwrap();

    // Three orders committed, one rolled back.
    let mut orders = Vec::new();
    for (customer, cents) in [("ada", 1200), ("grace", 800), ("ada", 500)] {
        let mut tx = queue.begin().await.unwrap();
        orders.push(
            shop::place_order(&queue, &mut tx.conn(), customer, cents)
                .await
                .unwrap(),
        );
        tx.commit().await.unwrap();
    }
    let mut tx = queue.begin().await.unwrap();
    let dropped = shop::place_order(&queue, &mut tx.conn(), "linus", 9900)
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    until("a receipt per committed order", || async {
        count(&queue, "SELECT COUNT(*) FROM shop_receipts").await == 3
    })
    .await;
    until("every committed order projected", || async {
        count(
            &queue,
            "SELECT CAST(COALESCE(SUM(orders), 0) AS BIGINT) FROM shop_customer_totals",
        )
        .await
            == 3
    })
    .await;
    until(
        "every saga reserved and waiting for its payment",
        || async {
            count(
                &queue,
                "SELECT COUNT(*) FROM shop_orders WHERE status = 'reserved'",
            )
            .await
                == 3
        },
    )
    .await;
    let want = vec![("ada".to_owned(), 2, 1700), ("grace".to_owned(), 1, 800)];
    assert_eq!(totals(&queue).await, want);
    assert!(
        shop::order_status(&queue, dropped)
            .await
            .unwrap_err()
            .is_not_found(),
        "the rolled-back order is nowhere"
    );

    // Two payments arrive (one of them twice: the webhook is resent).
    shop::confirm_payment(&queue, orders[0]).await.unwrap();
    shop::confirm_payment(&queue, orders[1]).await.unwrap();
    shop::confirm_payment(&queue, orders[1]).await.unwrap();
    until("the paid orders marked paid", || async {
        status(&queue, orders[0]).await == "paid" && status(&queue, orders[1]).await == "paid"
    })
    .await;
    assert_eq!(status(&queue, orders[2]).await, "reserved", "still waiting");
    assert_eq!(
        count(&queue, "SELECT COUNT(*) FROM shop_receipts").await,
        3,
        "one receipt per order, whatever ran twice"
    );

    // A rebuild empties the totals and replays the log: the same totals.
    let asked = queue
        .projector_request_rebuild("customer_totals", None)
        .await
        .unwrap();
    assert!(asked >= 1);
    until("the rebuild carried out", || async {
        let rows = queue
            .store()
            .projector_checkpoints(Some("customer_totals"))
            .await
            .unwrap();
        !rows.is_empty() && rows.iter().all(|r| !r.rebuild_requested && r.rebuilds >= 1)
    })
    .await;
    until("the totals replayed", || async {
        totals(&queue).await == want
    })
    .await;

    // The schedule's tick, now rather than at 18:00 Berlin time.
    scheduler.trigger(shop::DAILY_SALES).await.unwrap();
    until("the daily report written", || async {
        count(
            &queue,
            "SELECT CAST(COALESCE(SUM(orders), 0) AS BIGINT) FROM shop_daily_sales",
        )
        .await
            == 3
    })
    .await;
    assert_eq!(
        count(
            &queue,
            "SELECT CAST(COALESCE(SUM(cents), 0) AS BIGINT) FROM shop_daily_sales"
        )
        .await,
        2500
    );

    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_shop_keeps_its_promises() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("shop.db").display());
    shop_keeps_its_promises(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_shop_keeps_its_promises() {
    let db = FreshDb::new().await;
    shop_keeps_its_promises(&db.url).await;
    db.drop().await;
}

/// The shop's binary is drover's CLI with the shop in it: `handlers` prints
/// the shop's strategies and `schedules` its schedule with its next fire
/// time, and its own commands place and read an order.
#[test]
fn the_binary_is_drovers_cli_with_the_shop_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("shop.db").display());
    let shop = env!("CARGO_BIN_EXE_shop");
    let run = |args: &[&str]| {
        let out = Command::new(shop).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "shop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let order = run(&["place", &url, "ada", "1200"]);
    let order = order.trim();
    Uuid::parse_str(order).expect("place prints the order's id");
    assert_eq!(run(&["order", &url, order]).trim(), "placed");

    let handlers = run(&["--database-url", &url, "handlers"]);
    for want in [
        "send_receipt",
        "one receipt per order",
        "customer_totals",
        "checkout",
    ] {
        assert!(handlers.contains(want), "{want} in:\n{handlers}");
    }
    let schedules = run(&["--database-url", &url, "schedules"]);
    assert!(
        schedules.contains(shop::DAILY_SALES) && schedules.contains("Europe/Berlin"),
        "{schedules}"
    );
}

/// A database of the test's own on the PostgreSQL server of `DATABASE_URL`
/// (the machine's by default), as a service would have one.
struct FreshDb {
    admin: String,
    name: String,
    url: String,
}

impl FreshDb {
    async fn new() -> FreshDb {
        let admin = drover::testing::pg_url().await;
        let name = format!("shop_{}", Uuid::new_v4().simple());
        let mut c = sqlx::PgConnection::connect(&admin)
            .await
            .expect("PostgreSQL at DATABASE_URL");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
        let url = with_database(&admin, &name);
        FreshDb { admin, name, url }
    }

    /// Drops the database and its installation's roles (cluster-wide, so
    /// they would outlive it).
    async fn drop(self) {
        let roles = drover::testing::pg_installation_roles(&self.url, "drover").await;
        let mut c = sqlx::PgConnection::connect(&self.admin).await.unwrap();
        sqlx::query(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .execute(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
        drover::testing::pg_drop_roles(&self.admin, &roles).await;
    }
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[start..].find('/') {
        Some(slash) => &base[..start + slash],
        None => base,
    };
    if query.is_empty() {
        format!("{base}/{db}")
    } else {
        format!("{base}/{db}?{query}")
    }
}
