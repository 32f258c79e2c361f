//! Transactional enqueue through the queue API: the item exists if and only
//! if the caller's transaction commits, on PostgreSQL and on SQLite.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use drover::queue::{Kind, Queue};
use drover::store::Store;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, Executor};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct SendReceipt {
    order: u64,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "send_receipt";
}

#[tokio::test]
async fn postgres_enqueue_in_commits_or_vanishes_with_the_callers_write() {
    let (store, schema) = pg_fresh_store().await;
    let pool = store.pool().clone();
    let queue = Queue::new(store.clone());
    sqlx::query("SELECT 1").execute(&pool).await.ok();
    let mut wake = queue.store().wakeups().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let kept = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap();
    // The caller's role is untouched: it can still write its own rows.
    let role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(role, drover::testing::TEST_OWNER);
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let dropped = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 2 })
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert!(queue.get(Uuid::nil(), kept.item.id).await.is_ok());
    assert!(
        queue
            .get(Uuid::nil(), dropped.item.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    let lane = tokio::time::timeout(std::time::Duration::from_secs(5), wake.recv())
        .await
        .expect("a wake-up after the commit")
        .unwrap();
    assert_eq!(lane.lane, "default");
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn sqlite_enqueue_in_commits_or_vanishes_with_the_callers_write() {
    let path = std::env::temp_dir().join(format!("drover-tx-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = Arc::new(
        SqliteStore::open(&url, SqliteOptions::default())
            .await
            .unwrap(),
    );
    store.migrate().await.unwrap();
    let queue = Queue::new(store.clone());

    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let kept = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    queue.wake("default");

    let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let dropped = queue
        .enqueue_in(&mut *tx, SendReceipt { order: 2 })
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert!(queue.get(Uuid::nil(), kept.item.id).await.is_ok());
    assert!(
        queue
            .get(Uuid::nil(), dropped.item.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn a_connection_of_another_backend_is_refused() {
    let (store, schema) = pg_fresh_store().await;
    let pool = store.pool().clone();
    let memory_queue = Queue::memory();
    let mut tx = pool.begin().await.unwrap();
    let err = memory_queue
        .enqueue_in(&mut *tx, SendReceipt { order: 1 })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), drover::ErrorKind::Config);
    tx.rollback().await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}

// ---------------------------------------------------------------------------
// The engine-neutral caller transaction: one body of code, both engines.
// ---------------------------------------------------------------------------

use drover::events::{Event, NewEvent};
use drover::orchestration::Start;
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use drover::queue::Principal;
use drover::{Backend, TxConn};

#[derive(Serialize, Deserialize)]
struct OrderPlaced {
    order: i64,
}

/// What a service writes for one order, the same text on both engines: its
/// own row (in `table`, unqualified), a `work.send_receipt` outbox row, a
/// direct enqueue and an orchestration start. Returns the ids written.
async fn place_order(
    queue: &Queue,
    tx: &mut TxConn<'_>,
    table: &str,
    order: i64,
) -> drover::Result<(Uuid, Uuid, Uuid)> {
    // `$2` before `$1`: each number names its value on both engines.
    let insert = format!("INSERT INTO {table} (total, id) VALUES ($2, $1)");
    tx.query(&insert)
        .bind(order)
        .bind(order * 100)
        .execute()
        .await?;
    let outbox = queue
        .outbox_work_in(
            tx,
            &Principal::system(),
            &SendReceipt {
                order: order as u64,
            },
        )
        .await?;
    let item = queue.enqueue_in(tx, OrderPlaced { order }).await?;
    let start = Start {
        kind: "checkout".into(),
        tenant_id: Uuid::nil(),
        state: serde_json::json!({ "order": order }),
        first_step: "reserve".into(),
        lane: "default".into(),
        max_attempts: 3,
        idempotency_key: None,
    };
    let saga = queue.start_in(tx, &start).await?;
    Ok((outbox, item.item.id, saga.record.id))
}

impl Kind for OrderPlaced {
    const NAME: &'static str = "order_placed";
    const LANE: &'static str = "orders";
}

/// The user's rows of `table` with `id`, read in a transaction of the
/// queue's own (rolled back).
async fn user_rows(queue: &Queue, table: &str, id: i64) -> i64 {
    let mut tx = queue.begin().await.unwrap();
    let sql = format!("SELECT COUNT(*) AS n, MAX(total) AS total FROM {table} WHERE id = $1");
    let row = tx.query(&sql).bind(id).fetch_one().await.unwrap();
    let n: i64 = row.try_get("n").unwrap();
    if n > 0 {
        let total: i64 = row.try_get(1_usize).unwrap();
        assert_eq!(
            total,
            id * 100,
            "the values went to the columns their numbers name"
        );
    }
    tx.rollback().await.unwrap();
    n
}

/// One neutral transaction: committed, the user's row, the outbox row, the
/// item and the orchestration all exist (and the commit wakes the item's
/// lane); rolled back, none does.
async fn neutral_tx_commits_all_or_nothing(queue: &Queue, table: &str) {
    let mut wake = queue.store().wakeups().await.unwrap();
    let tenant = Uuid::nil();

    let mut tx = queue.begin().await.unwrap();
    let (outbox, item, saga) = place_order(queue, &mut tx.conn(), table, 1).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(user_rows(queue, table, 1).await, 1);
    assert!(
        queue
            .store()
            .outbox_get(tenant, outbox)
            .await
            .unwrap()
            .is_some()
    );
    assert!(queue.get(tenant, item).await.is_ok());
    assert!(queue.orchestration(tenant, saga).await.is_ok());
    // The commit's wake-up for the item's lane: NOTIFY on PostgreSQL, the
    // transaction's own in-process wake-up on SQLite.
    loop {
        let w = tokio::time::timeout(std::time::Duration::from_secs(10), wake.recv())
            .await
            .expect("a wake-up for the committed item's lane")
            .unwrap();
        if w.lane == "orders" {
            break;
        }
    }

    let mut tx = queue.begin().await.unwrap();
    let (outbox, item, saga) = place_order(queue, &mut tx.conn(), table, 2).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(user_rows(queue, table, 2).await, 0);
    assert!(
        queue
            .store()
            .outbox_get(tenant, outbox)
            .await
            .unwrap()
            .is_none()
    );
    assert!(queue.get(tenant, item).await.unwrap_err().is_not_found());
    assert!(
        queue
            .orchestration(tenant, saga)
            .await
            .unwrap_err()
            .is_not_found()
    );

    // Dropped without a commit: rolled back too.
    {
        let mut tx = queue.begin().await.unwrap();
        place_order(queue, &mut tx.conn(), table, 3).await.unwrap();
    }
    assert_eq!(user_rows(queue, table, 3).await, 0);
}

/// The service's own write for one order, shared by its request path (in
/// `queue.begin()`'s transaction) and its projector (in the checkpoint's).
async fn record_order(tx: &mut TxConn<'_>, table: &str, order: i64) -> drover::Result<()> {
    let insert = format!("INSERT INTO {table} (id, total) VALUES ($1, $2)");
    tx.query(&insert)
        .bind(order)
        .bind(order * 100)
        .execute()
        .await?;
    Ok(())
}

/// A projector keeping the user's `table` (unqualified, as the service
/// names it on its own pool) from `order_placed` events.
struct OrdersTable {
    table: String,
}

#[async_trait::async_trait]
impl Projector for OrdersTable {
    fn name(&self) -> &str {
        "orders_table"
    }
    fn topics(&self) -> Vec<String> {
        vec!["order_placed".into()]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "never applied twice: the row lands in the checkpoint's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the rows, in the same database",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset deletes the rows; the log is replayed",
            lag: "read by the test after each pass",
        }
    }
    async fn apply(&self, e: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let mut conn = tx.conn().expect("a database store shares its transaction");
        let order = e.payload["order"].as_i64().expect("an order number");
        record_order(&mut conn, &self.table, order).await
    }
    async fn reset(&self, _tenant: Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let mut conn = tx.conn().expect("a database store shares its transaction");
        let delete = format!("DELETE FROM {}", self.table);
        conn.query(&delete).execute().await?;
        Ok(())
    }
}

/// A projector's `apply` runs the service's own code on the neutral view
/// of its transaction, naming the service's table as the service does; the
/// same function runs in `queue.begin()`'s transaction.
async fn projector_shares_the_callers_code(queue: &Queue, table: &str) {
    let mut tx = queue.begin().await.unwrap();
    record_order(&mut tx.conn(), table, 10).await.unwrap();
    tx.commit().await.unwrap();

    queue
        .store()
        .event_append_many(&[NewEvent::new(
            "order_placed",
            serde_json::json!({"order": 11}),
        )])
        .await
        .unwrap();
    let store = queue.store().clone();
    let runner = ProjectorRunner::new(
        store.clone(),
        Arc::new(OrdersTable {
            table: table.to_owned(),
        }),
        ProjectorConfig {
            backoff_base: std::time::Duration::ZERO,
            ..ProjectorConfig::for_backend(store.backend())
        },
    )
    .unwrap();
    let report = runner.run_once().await.unwrap();
    assert_eq!((report.failed, report.applied), (0, 1), "{report:?}");
    assert_eq!(user_rows(queue, table, 10).await, 1);
    assert_eq!(user_rows(queue, table, 11).await, 1);
}

#[tokio::test]
async fn postgres_neutral_tx_commits_all_or_nothing() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone());
    // The user's own table in `public`, where the login's own search_path
    // finds it (the superuser creates it: PostgreSQL 15 lets no one else
    // create in `public`).
    let table = format!("orders_{}", Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&pg_url().await).await.unwrap();
    admin
        .execute(
            format!(
                "CREATE TABLE public.{table} (id BIGINT PRIMARY KEY, total BIGINT NOT NULL); \
                 GRANT ALL ON public.{table} TO {}",
                drover::testing::TEST_OWNER
            )
            .as_str(),
        )
        .await
        .unwrap();
    let tx = queue.begin().await.unwrap();
    assert_eq!(tx.backend(), Backend::Postgres);
    tx.rollback().await.unwrap();

    neutral_tx_commits_all_or_nothing(&queue, &table).await;
    projector_shares_the_callers_code(&queue, &table).await;

    admin
        .execute(format!("DROP TABLE public.{table}").as_str())
        .await
        .unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn sqlite_neutral_tx_commits_all_or_nothing() {
    let path = std::env::temp_dir().join(format!("drover-tx-{}.db", Uuid::new_v4()));
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url, SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let queue = Queue::new(Arc::new(store.clone()));
    let table = "orders";
    let mut tx = queue.begin().await.unwrap();
    assert_eq!(tx.backend(), Backend::Sqlite);
    tx.query("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)")
        .execute()
        .await
        .unwrap();
    tx.commit().await.unwrap();

    neutral_tx_commits_all_or_nothing(&queue, table).await;
    projector_shares_the_callers_code(&queue, table).await;

    store.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

#[tokio::test]
async fn the_memory_store_has_no_caller_transactions() {
    let err = Queue::memory().begin().await.unwrap_err();
    assert_eq!(err.kind(), drover::ErrorKind::Config);
    assert!(
        err.to_string()
            .contains("memory store has no caller transactions"),
        "{err}"
    );
}
