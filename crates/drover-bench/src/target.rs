//! The sandbox a bench runs in: a fresh schema on PostgreSQL (dropped at
//! the end), a temporary file on SQLite (deleted at the end), and the
//! queues producers and workers use over it.

use std::path::PathBuf;

use drover::store::{ConnectOptions, connect_with};
use drover::{Backend, Queue};
use sqlx::ConnectOptions as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use std::str::FromStr;

use crate::BenchError;

/// True for a `postgres://` or `postgresql://` URL.
pub(crate) fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// A sandbox and how to reach it.
pub(crate) struct Target {
    pub backend: Backend,
    url: String,
    /// PostgreSQL: the bench schema and an admin pool (search_path set to it).
    pub schema: Option<String>,
    pub admin: Option<PgPool>,
    /// SQLite: the temporary file, and the one queue every part shares (its
    /// wake-ups are in-process, so producer and workers share the store, as
    /// an embedded service does).
    file: Option<PathBuf>,
    shared: Option<Queue>,
}

impl Target {
    /// Creates the sandbox and migrates it.
    pub async fn create(url: &str) -> Result<Target, BenchError> {
        if is_postgres(url) {
            let schema = format!(
                "drover_bench_{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            );
            let opts = PgConnectOptions::from_str(url)
                .map_err(|_| drover::Error::invalid("database_url", "is not a PostgreSQL URL"))?
                .options([("search_path", schema.as_str())])
                // Loading a large backlog is slow by design: not a warning.
                .log_slow_statements(log::LevelFilter::Off, std::time::Duration::from_secs(1));
            let admin = PgPoolOptions::new()
                .max_connections(4)
                .connect_with(opts)
                .await?;
            let t = Target {
                backend: Backend::Postgres,
                url: url.to_owned(),
                schema: Some(schema),
                admin: Some(admin),
                file: None,
                shared: None,
            };
            t.queue(2).await?.migrate().await?;
            return Ok(t);
        }
        if url.starts_with("sqlite:") {
            let file = std::env::temp_dir()
                .join(format!("drover-bench-{}.db", uuid::Uuid::new_v4().simple()));
            let store = connect_with(
                &format!("sqlite://{}", file.display()),
                &ConnectOptions::default(),
            )
            .await?;
            let queue = Queue::new(store);
            queue.migrate().await?;
            return Ok(Target {
                backend: Backend::Sqlite,
                url: url.to_owned(),
                schema: None,
                admin: None,
                file: Some(file),
                shared: Some(queue),
            });
        }
        Err(drover::Error::invalid(
            "database_url",
            "the bench runs on postgres:// or sqlite: URLs",
        )
        .into())
    }

    /// What the sandbox is, for the progress notes.
    pub fn describe(&self) -> String {
        match (&self.schema, &self.file) {
            (Some(s), _) => format!("PostgreSQL schema {s}"),
            (_, Some(f)) => format!("SQLite file {}", f.display()),
            _ => "?".into(),
        }
    }

    /// The database URL the bench was given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A queue over the sandbox with a pool of `pool_size` (PostgreSQL: a
    /// store of its own; SQLite: the shared one).
    pub async fn queue(&self, pool_size: u32) -> Result<Queue, BenchError> {
        if let Some(q) = &self.shared {
            return Ok(q.clone());
        }
        let schema = self.schema.clone().unwrap_or_default();
        let store = connect_with(
            &self.url,
            &ConnectOptions {
                pool_size,
                schema,
                ..ConnectOptions::default()
            },
        )
        .await?;
        Ok(Queue::new(store))
    }

    /// Items still pending or claimed: zero when the queue is drained
    /// (buffered completions included).
    pub async fn open_items(&self) -> Result<i64, BenchError> {
        if let Some(admin) = &self.admin {
            // Both partial indexes (pending, claimed) answer this cheaply.
            let row = sqlx::query(
                "SELECT (SELECT count(*) FROM items WHERE status = 'pending') \
                      + (SELECT count(*) FROM items WHERE status = 'claimed')",
            )
            .fetch_one(admin)
            .await?;
            return Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0));
        }
        let queue = self.queue(1).await?;
        let n = queue
            .counts()
            .await?
            .iter()
            .filter(|r| matches!(r.status, drover::Status::Pending | drover::Status::Claimed))
            .map(|r| r.count)
            .sum();
        Ok(n)
    }

    /// The admin pool (PostgreSQL only).
    pub fn admin(&self) -> Result<&PgPool, BenchError> {
        self.admin
            .as_ref()
            .ok_or_else(|| drover::Error::invalid("database_url", "needs PostgreSQL").into())
    }

    /// Drops the schema or deletes the file.
    pub async fn drop_sandbox(self) -> Result<(), BenchError> {
        if let (Some(admin), Some(schema)) = (&self.admin, &self.schema) {
            // The schema name is ours (validated characters only).
            sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .execute(admin)
                .await?;
            admin.close().await;
        }
        if let Some(q) = self.shared {
            drop(q);
        }
        if let Some(f) = &self.file {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = f.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
        }
        Ok(())
    }
}
