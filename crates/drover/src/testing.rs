//! Test helpers (feature `test-util`): a PostgreSQL server to test against
//! and a fresh, migrated schema per test.
//!
//! Invariants: every store these helpers build lives in its own schema
//! (`drover_t_<random>`), so tests run in parallel without seeing each
//! other's rows; a missing server is never a silent skip — the helpers panic
//! with what they tried.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use sqlx::Connection;
use tokio::sync::OnceCell;

use crate::store::Store;
use crate::store::contract::Harness;
use crate::store::postgres::{PgOptions, PgStore, validate_schema};

/// The server tried first when `DATABASE_URL` is not set.
pub const DATABASE_URL_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Pool size of the stores tests get: enough for the concurrency cases.
pub const TEST_MAX_CONNECTIONS: u32 = 8;

static URL: OnceCell<String> = OnceCell::const_new();

/// The URL of a PostgreSQL server for tests.
///
/// Reads `DATABASE_URL` (default [`DATABASE_URL_DEFAULT`]). If no server
/// answers there, uses a throwaway cluster shared by every test process of
/// the machine: started once (under a file lock) from the machine's own
/// `initdb`/`pg_ctl` (on `PATH` or under `/usr/lib/postgresql/*/bin`) in
/// `$TMPDIR/drover-test-pg` on port [`FALLBACK_PORT`], trust authentication,
/// and left running for the next test process. As root the cluster is run
/// as the `postgres` OS user, since PostgreSQL refuses to run as root.
///
/// # Panics
/// When neither a server at the URL nor a throwaway cluster is available:
/// tests that need PostgreSQL never skip silently.
pub async fn pg_url() -> String {
    URL.get_or_init(|| async {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DATABASE_URL_DEFAULT.to_owned());
        match sqlx::PgConnection::connect(&url).await {
            Ok(conn) => {
                let _ = conn.close().await;
                url
            }
            Err(first) => match tokio::task::spawn_blocking(shared_cluster).await {
                Ok(Ok(url)) => url,
                Ok(Err(second)) => panic!(
                    "no PostgreSQL for tests: {url} did not answer ({first}), \
                     and starting a throwaway cluster failed: {second}"
                ),
                Err(e) => panic!("starting a throwaway cluster panicked: {e}"),
            },
        }
    })
    .await
    .clone()
}

/// The port of the shared throwaway cluster.
pub const FALLBACK_PORT: u16 = 54329;

/// Finds a PostgreSQL binary on PATH or under `/usr/lib/postgresql/*/bin`.
fn find_bin(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .collect::<Vec<_>>()
    });
    let versioned = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name));
    on_path.chain(versioned).find(|p| p.is_file())
}

fn is_root() -> bool {
    // The effective uid, without a libc dependency: /proc/self/status's
    // Uid line is "real effective saved fs".
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// A command for a PostgreSQL binary, run as `postgres` when we are root.
fn pg_command(bin: &PathBuf) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

/// Starts (or finds running) the shared throwaway cluster; returns its URL.
fn shared_cluster() -> Result<String, String> {
    let initdb = find_bin("initdb").ok_or("initdb not found")?;
    let pg_ctl = find_bin("pg_ctl").ok_or("pg_ctl not found")?;
    let dir = std::env::temp_dir().join("drover-test-pg");
    let data = dir.join("data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock = std::fs::File::create(dir.join("lock"))
        .map_err(|e| format!("cannot create the lock file: {e}"))?;
    // Test processes run in parallel: one starts the cluster, the others wait.
    lock.lock().map_err(|e| format!("cannot lock: {e}"))?;
    let url = format!("postgres://postgres@127.0.0.1:{FALLBACK_PORT}/postgres");
    let running = pg_command(&pg_ctl)
        .arg("-D")
        .arg(&data)
        .arg("status")
        .output()
        .is_ok_and(|o| o.status.success());
    if !running {
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir))?;
        }
        if !data.join("PG_VERSION").exists() {
            run(pg_command(&initdb).arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]))?;
        }
        let opts = format!(
            "-p {FALLBACK_PORT} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300",
            dir.display()
        );
        run(pg_command(&pg_ctl)
            .arg("-D")
            .arg(&data)
            .args(["-w", "-l"])
            .arg(dir.join("log"))
            .args(["-o", &opts, "start"]))?;
        tracing::info!(%url, dir = %dir.display(), "started a throwaway PostgreSQL cluster for tests");
    }
    let _ = lock.unlock();
    // The default test database, as on a machine with a server of its own.
    Ok(url)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{shown}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// A fresh store in a new schema `drover_t_<random>`, migrated and empty,
/// and the schema's name (for [`pg_drop_schema`]).
///
/// # Panics
/// When the server is unavailable or the migration fails.
pub async fn pg_fresh_store() -> (Arc<PgStore>, String) {
    let url = pg_url().await;
    let schema = format!("drover_t_{}", uuid::Uuid::new_v4().simple());
    let opts = PgOptions {
        schema: schema.clone(),
        max_connections: TEST_MAX_CONNECTIONS,
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, opts)
        .await
        .unwrap_or_else(|e| panic!("connecting a test store to {url}: {e}"));
    store
        .migrate()
        .await
        .unwrap_or_else(|e| panic!("migrating test schema {schema}: {e}"));
    (Arc::new(store), schema)
}

/// Drops a test schema and everything in it. Logs, never panics: it runs
/// as cleanup after the assertions that matter.
pub async fn pg_drop_schema(url: &str, schema: &str) {
    if validate_schema(schema).is_err() {
        tracing::warn!(schema, "not dropping a schema with an invalid name");
        return;
    }
    let dropped = async {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::Executor::execute(
            &mut conn,
            format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str(),
        )
        .await?;
        conn.close().await
    }
    .await;
    if let Err(e) = dropped {
        tracing::warn!(schema, error = %e, "dropping a test schema failed");
    }
}

/// As [`pg_fresh_store`], with the store in transaction-pooler mode
/// ([`PoolMode::Transaction`](crate::store::postgres::PoolMode)): unnamed
/// statements, every statement in an explicit transaction, no startup
/// options; session work over the same URL given as the direct one.
///
/// # Panics
/// As [`pg_fresh_store`].
pub async fn pg_fresh_pooled_store() -> (Arc<PgStore>, String) {
    let url = pg_url().await;
    let schema = format!("drover_t_{}", uuid::Uuid::new_v4().simple());
    let opts = PgOptions {
        schema: schema.clone(),
        max_connections: TEST_MAX_CONNECTIONS,
        pooler: crate::store::postgres::PoolerOptions {
            mode: crate::store::postgres::PoolMode::Transaction,
            direct_url: Some(url.clone()),
        },
    };
    let store = PgStore::connect(&url, opts)
        .await
        .unwrap_or_else(|e| panic!("connecting a test store to {url}: {e}"));
    store
        .migrate()
        .await
        .unwrap_or_else(|e| panic!("migrating test schema {schema}: {e}"));
    (Arc::new(store), schema)
}

/// A contract-suite [`Harness`] over a fresh PostgreSQL schema with the
/// store in transaction-pooler mode, dropped by the harness's cleanup.
pub async fn pg_pooled_harness() -> Harness {
    let (store, schema) = pg_fresh_pooled_store().await;
    let url = pg_url().await;
    let store: Arc<dyn Store> = store;
    Harness {
        store,
        clock: None,
        cleanup: Some(Box::new(move || {
            Box::pin(async move { pg_drop_schema(&url, &schema).await })
        })),
    }
}

/// A contract-suite [`Harness`] over a fresh PostgreSQL schema, dropped by
/// the harness's cleanup. Time passes by sleeping (the database clock rules).
pub async fn pg_harness() -> Harness {
    let (store, schema) = pg_fresh_store().await;
    let url = pg_url().await;
    let store: Arc<dyn Store> = store;
    Harness {
        store,
        clock: None,
        cleanup: Some(Box::new(move || {
            Box::pin(async move { pg_drop_schema(&url, &schema).await })
        })),
    }
}
