//! Shared setup for the fault scenarios: a database with drover's tables and
//! the effect tables, items to enqueue, worker processes to start.
#![allow(clippy::expect_used, clippy::unwrap_used)]

pub mod http;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::queue::Principal;
use drover::store::postgres::{PgOptions, PgStore};
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::testing::cluster::Cluster;
use drover::{NewItem, Queue, Store};
use drover_faults::checker::{self, Figures, KillFigures};
use drover_faults::effects;
use drover_faults::limits_checker::{self, History};
use drover_faults::procs::Proc;
use sqlx::{PgPool, SqlitePool};
use uuid::Uuid;

pub const BIN: &str = env!("CARGO_BIN_EXE_drover-fault-worker");
pub const SCHEMA: &str = "drover";

/// Where a run's data lives.
pub enum Db {
    Pg { cluster: Cluster, pool: PgPool },
    Sqlite { path: PathBuf, pool: SqlitePool },
}

pub struct Run {
    pub db: Db,
    pub queue: Queue,
    pub url: String,
    pub dir: tempfile::TempDir,
    next_log: std::sync::atomic::AtomicUsize,
}

impl Run {
    /// A throwaway cluster, migrated, with the effect tables.
    pub async fn pg() -> Run {
        let cluster = Cluster::start().expect("throwaway cluster");
        let url = cluster.url();
        Self::pg_at(cluster, url).await
    }

    /// As [`Run::pg`] on a cluster that keeps acknowledged commits over an
    /// immediate restart (`synchronous_commit` on).
    pub async fn pg_durable() -> Run {
        let cluster = Cluster::start_durable().expect("throwaway cluster");
        let url = cluster.url();
        Self::pg_at(cluster, url).await
    }

    /// As [`Run::pg`], with the workers connecting to `worker_url` (a proxy).
    pub async fn pg_at(cluster: Cluster, worker_url: String) -> Run {
        let admin = cluster.url();
        let store = PgStore::connect(
            &admin,
            PgOptions {
                schema: SCHEMA.into(),
                max_connections: 8,
                ..PgOptions::default()
            },
        )
        .await
        .expect("connect");
        store.migrate().await.expect("migrate");
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&admin)
            .await
            .expect("admin pool");
        sqlx::raw_sql(&effects::pg_setup_sql(SCHEMA))
            .execute(&pool)
            .await
            .expect("effect tables");
        let store: Arc<dyn Store> = Arc::new(store);
        Run {
            db: Db::Pg { cluster, pool },
            queue: Queue::new(store),
            url: worker_url,
            dir: tempdir(),
            next_log: 0.into(),
        }
    }

    /// A SQLite file shared by the processes, migrated, with the effect tables.
    pub async fn sqlite() -> Run {
        let dir = tempdir();
        let path = dir.path().join("drover.db");
        let url = format!("sqlite://{}", path.display());
        let store = SqliteStore::open(&url, SqliteOptions::default())
            .await
            .expect("open");
        store.migrate().await.expect("migrate");
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(Duration::from_secs(10));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(opts)
            .await
            .expect("sqlite pool");
        sqlx::raw_sql(effects::SQLITE_SETUP)
            .execute(&pool)
            .await
            .expect("effect tables");
        let store: Arc<dyn Store> = Arc::new(store);
        Run {
            db: Db::Sqlite { path, pool },
            queue: Queue::new(store),
            url,
            dir,
            next_log: 0.into(),
        }
    }

    pub fn pg_pool(&self) -> &PgPool {
        match &self.db {
            Db::Pg { pool, .. } => pool,
            Db::Sqlite { .. } => panic!("not PostgreSQL"),
        }
    }

    pub fn cluster(&self) -> &Cluster {
        match &self.db {
            Db::Pg { cluster, .. } => cluster,
            Db::Sqlite { .. } => panic!("not PostgreSQL"),
        }
    }

    /// Enqueues `n` items of `kind` (`op_id` unique, `ms` sleep), in batches.
    pub async fn enqueue(&self, kind: &str, n: usize, ms: u64, max_attempts: i32) -> Vec<Uuid> {
        let mut ids = Vec::with_capacity(n);
        let mut batch = Vec::new();
        for i in 0..n {
            let mut item = NewItem::new(
                kind,
                serde_json::json!({"op_id": format!("op-{}-{i}", Uuid::new_v4().simple()), "ms": ms}),
            );
            item.max_attempts = max_attempts;
            ids.push(item.id);
            batch.push(item);
            if batch.len() == 1000 {
                self.queue
                    .enqueue_many(&Principal::system(), std::mem::take(&mut batch))
                    .await
                    .expect("enqueue");
            }
        }
        if !batch.is_empty() {
            self.queue
                .enqueue_many(&Principal::system(), batch)
                .await
                .expect("enqueue");
        }
        ids
    }

    /// Starts a worker process with `extra` flags after the defaults.
    pub fn spawn(&self, extra: &[&str]) -> Proc {
        self.spawn_env(extra, &[])
    }

    /// As [`Run::spawn`], with `env` added to the process's environment.
    pub fn spawn_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Proc {
        let n = self
            .next_log
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut args = vec![
            "--database-url".to_owned(),
            self.url.clone(),
            "--schema".into(),
            SCHEMA.into(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Proc::spawn_env(
            std::path::Path::new(BIN),
            &args,
            &self.dir.path().join(format!("worker-{n}.log")),
            env,
        )
    }

    /// Items not yet in a final status.
    pub async fn open_items(&self) -> i64 {
        let sql = "SELECT count(*) FROM items WHERE status NOT IN ('done', 'failed', 'cancelled')";
        match &self.db {
            Db::Pg { pool, .. } => {
                sqlx::query_scalar(&sql.replace("FROM items", "FROM drover.items"))
                    .fetch_one(pool)
                    .await
                    .unwrap_or(i64::MAX)
            }
            Db::Sqlite { pool, .. } => sqlx::query_scalar(sql)
                .fetch_one(pool)
                .await
                .unwrap_or(i64::MAX),
        }
    }

    /// Lines containing `needle` in every worker log of this run (killed
    /// workers' logs included).
    pub fn log_count(&self, needle: &str) -> usize {
        std::fs::read_dir(self.dir.path())
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                    .map(|e| {
                        std::fs::read_to_string(e.path())
                            .unwrap_or_default()
                            .lines()
                            .filter(|l| l.contains(needle))
                            .count()
                    })
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Handler starts recorded so far.
    pub async fn starts(&self) -> i64 {
        match &self.db {
            Db::Pg { pool, .. } => sqlx::query_scalar("SELECT count(*) FROM drover.starts")
                .fetch_one(pool)
                .await
                .unwrap_or(-1),
            Db::Sqlite { pool, .. } => sqlx::query_scalar("SELECT count(*) FROM starts")
                .fetch_one(pool)
                .await
                .unwrap_or(-1),
        }
    }

    /// Items in `status`.
    pub async fn count_status(&self, status: &str) -> i64 {
        let sql = "SELECT count(*) FROM items WHERE status = $1";
        match &self.db {
            Db::Pg { pool, .. } => {
                sqlx::query_scalar(&sql.replace("FROM items", "FROM drover.items"))
                    .bind(status)
                    .fetch_one(pool)
                    .await
                    .unwrap_or(-1)
            }
            Db::Sqlite { pool, .. } => sqlx::query_scalar(&sql.replace("$1", "?1"))
                .bind(status)
                .fetch_one(pool)
                .await
                .unwrap_or(-1),
        }
    }

    /// Waits until every item is final, at most `limit`; true if so.
    pub async fn wait_final(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.open_items().await == 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    pub async fn figures(&self) -> Figures {
        match &self.db {
            Db::Pg { pool, .. } => checker::pg_figures(pool, SCHEMA).await.expect("figures"),
            Db::Sqlite { pool, .. } => checker::sqlite_figures(pool).await.expect("figures"),
        }
    }

    /// Records each grouped item's place in its group's enqueue order.
    pub async fn record_order(&self, items: &[(Uuid, String, i32)]) {
        match &self.db {
            Db::Pg { pool, .. } => limits_checker::pg_record_order(pool, SCHEMA, items)
                .await
                .expect("record the enqueue order"),
            Db::Sqlite { pool, .. } => limits_checker::sqlite_record_order(pool, items)
                .await
                .expect("record the enqueue order"),
        }
    }

    /// What the limits checker reads of the items of `kind`.
    pub async fn limit_history(&self, kind: &str) -> History {
        match &self.db {
            Db::Pg { pool, .. } => limits_checker::pg_history(pool, SCHEMA, kind)
                .await
                .expect("limit history"),
            Db::Sqlite { pool, .. } => limits_checker::sqlite_history(pool, kind)
                .await
                .expect("limit history"),
        }
    }

    /// Items claimed now by the worker process `pid` (its worker id is
    /// `host:pid:suffix`).
    pub async fn claimed_by(&self, pid: u32) -> i64 {
        let sql = "SELECT count(*) FROM items WHERE status = 'claimed' AND claimed_by LIKE $1";
        let like = format!("%:{pid}:%");
        match &self.db {
            Db::Pg { pool, .. } => {
                sqlx::query_scalar(&sql.replace("FROM items", "FROM drover.items"))
                    .bind(like)
                    .fetch_one(pool)
                    .await
                    .unwrap_or(-1)
            }
            Db::Sqlite { pool, .. } => sqlx::query_scalar(&sql.replace("$1", "?1"))
                .bind(like)
                .fetch_one(pool)
                .await
                .unwrap_or(-1),
        }
    }

    pub async fn kill_figures(&self, pid: u32, at: chrono::DateTime<chrono::Utc>) -> KillFigures {
        match &self.db {
            Db::Pg { pool, .. } => checker::pg_kill_figures(pool, SCHEMA, pid, at)
                .await
                .expect("kill figures"),
            Db::Sqlite { pool, .. } => checker::sqlite_kill_figures(pool, pid, at)
                .await
                .expect("kill figures"),
        }
    }
}

/// A temporary directory for logs (and the SQLite file); kept after the
/// run when `FAULT_KEEP_LOGS` is set, its path printed.
fn tempdir() -> tempfile::TempDir {
    let mut b = tempfile::Builder::new();
    b.prefix("drover-fault-");
    if std::env::var_os("FAULT_KEEP_LOGS").is_some() {
        b.disable_cleanup(true);
    }
    let dir = b.tempdir().expect("tempdir");
    if std::env::var_os("FAULT_KEEP_LOGS").is_some() {
        eprintln!("fault run directory: {}", dir.path().display());
    }
    dir
}

/// Prints a result line the docs table is built from.
pub fn report(scenario: &str, size: &str, line: &str) {
    eprintln!("FAULT-FIGURES | {scenario} | {size} | {line}");
}
