//! A service's own tables beside drover's, on PostgreSQL or SQLite, with
//! one body of code: the service opens drover's store itself (so it keeps
//! a handle on the pools), builds the queue on it, and writes its own row
//! and an outbox row in one transaction the queue opens
//! (`queue.begin()`), with one SQL text for both engines.
//!
//! ```text
//! cargo run -p drover --example own_pool                                          # a temporary SQLite file
//! cargo run -p drover --example own_pool -- postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! The full outbox → relay → handler path is `examples/order_service.rs`;
//! `docs/library.md` explains each step.

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use drover::queue::{Kind, Principal};
use drover::store::postgres::{PgOptions, PgStore};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{SCHEMA_DEFAULT, Store};
use drover::{Queue, TxConn};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The follow-up work of an order, written to the outbox with it.
#[derive(Debug, Serialize, Deserialize)]
struct SendReceipt {
    order: String,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "send_receipt";
}

/// The service's handles: the queue, and the store's pools for the
/// service's own work outside drover's transactions.
enum Service {
    /// SQLite: `SqliteStore` is cheap to clone (clones share the pools), so
    /// the service keeps one and gives the queue another. Its writer is
    /// the file's one writer: the service writes through it too
    /// (`queue.begin()` is a `BEGIN IMMEDIATE` on it), never through a
    /// second connection of its own, which would wait for the write lock.
    Sqlite { queue: Queue, store: SqliteStore },
    /// PostgreSQL: `PgStore` is not `Clone`; an `Arc<PgStore>` is shared
    /// with the queue instead. The service's own pool stands beside it
    /// (both open connections to the same database).
    Postgres {
        queue: Queue,
        store: Arc<PgStore>,
        own: sqlx::PgPool,
    },
}

impl Service {
    async fn open(url: &str) -> drover::Result<Service> {
        if url.starts_with("postgres") {
            // The service's own pool: its search_path, its login.
            let own = sqlx::PgPool::connect(url).await?;
            // drover's store, its tables in their own schema. To share one
            // pool instead: PgStore::from_pool(own.clone(), SCHEMA_DEFAULT).
            let opts = PgOptions {
                schema: SCHEMA_DEFAULT.to_owned(),
                ..PgOptions::default()
            };
            let store = Arc::new(PgStore::connect(url, opts).await?);
            store.migrate().await?;
            let queue = Queue::new(store.clone());
            Ok(Service::Postgres { queue, store, own })
        } else {
            let store = SqliteStore::open(url, SqliteOptions::default()).await?;
            store.migrate().await?;
            let queue = Queue::new(Arc::new(store.clone()));
            Ok(Service::Sqlite { queue, store })
        }
    }

    fn queue(&self) -> &Queue {
        match self {
            Service::Sqlite { queue, .. } | Service::Postgres { queue, .. } => queue,
        }
    }

    /// The service's own count of its orders, on its own handle (the one
    /// per-engine line of the program: a read outside any transaction).
    async fn orders(&self) -> drover::Result<i64> {
        let sql = "SELECT COUNT(*) FROM own_pool_orders";
        Ok(match self {
            Service::Sqlite { store, .. } => {
                sqlx::query_scalar(sql).fetch_one(store.writer()).await?
            }
            Service::Postgres { own, .. } => sqlx::query_scalar(sql).fetch_one(own).await?,
        })
    }

    async fn close(self) {
        match self {
            Service::Sqlite { store, .. } => store.close().await,
            Service::Postgres { store, own, .. } => {
                own.close().await;
                store.pool().close().await;
            }
        }
    }
}

/// One order: the service's row and its receipt's outbox row, on any
/// transaction of either engine (a `queue.begin()`, or a projector's
/// `ProjectionTx::conn()`). `$1`, `$2` on both engines.
async fn place_order(queue: &Queue, tx: &mut TxConn<'_>, cents: i64) -> drover::Result<Uuid> {
    let order = Uuid::now_v7().to_string();
    tx.query("INSERT INTO own_pool_orders (id, cents) VALUES ($1, $2)")
        .bind(&order)
        .bind(cents)
        .execute()
        .await?;
    queue
        .outbox_work_in(tx, &Principal::system(), &SendReceipt { order })
        .await
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let temp = std::env::temp_dir().join(format!("drover-own-pool-{}.db", Uuid::new_v4()));
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("sqlite://{}", temp.display()));
    let service = Service::open(&url).await?;
    let queue = service.queue().clone();

    // The service's schema, in a transaction of the queue's: DDL both
    // engines take as it is.
    let mut tx = queue.begin().await?;
    tx.query(
        "CREATE TABLE IF NOT EXISTS own_pool_orders (id TEXT PRIMARY KEY, cents BIGINT NOT NULL)",
    )
    .execute()
    .await?;
    tx.commit().await?;
    let before = service.orders().await?;

    // Committed: the order and its outbox row both exist.
    let mut tx = queue.begin().await?;
    let kept = place_order(&queue, &mut tx.conn(), 1250).await?;
    tx.commit().await?; // on SQLite this also wakes the local relay

    // Rolled back: neither does.
    let mut tx = queue.begin().await?;
    let dropped = place_order(&queue, &mut tx.conn(), 990).await?;
    tx.rollback().await?;

    let outbox = queue.store();
    println!(
        "{:?}: {} new order(s); outbox row of the committed order: {}; of the rolled-back one: {}",
        outbox.backend(),
        service.orders().await? - before,
        outbox.outbox_get(Uuid::nil(), kept).await?.is_some(),
        outbox.outbox_get(Uuid::nil(), dropped).await?.is_some(),
    );
    service.close().await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", temp.display()));
    }
    Ok(())
}
