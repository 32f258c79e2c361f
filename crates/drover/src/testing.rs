//! Test helpers (feature `test-util`): a PostgreSQL server to test against
//! and a fresh, migrated schema per test.
//!
//! Invariants: every store these helpers build lives in its own schema
//! (`drover_t_<random>`), so tests run in parallel without seeing each
//! other's rows; a missing server is never a silent skip — the helpers panic
//! with what they tried.

use std::net::TcpListener;
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
/// answers there, starts a throwaway cluster once per process with the
/// machine's `initdb`/`pg_ctl` (on `PATH` or under `/usr/lib/postgresql/*/bin`)
/// in a temporary directory on a free port, with trust authentication.
///
/// # Panics
/// When neither a server at the URL nor a throwaway cluster is available.
pub async fn pg_url() -> String {
    URL.get_or_init(|| async {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DATABASE_URL_DEFAULT.to_owned());
        match sqlx::PgConnection::connect(&url).await {
            Ok(conn) => {
                let _ = conn.close().await;
                url
            }
            Err(first) => match start_cluster() {
                Ok(url) => url,
                Err(second) => panic!(
                    "no PostgreSQL for tests: {url} did not answer ({first}), \
                     and starting a throwaway cluster failed: {second}"
                ),
            },
        }
    })
    .await
    .clone()
}

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

/// Starts a throwaway cluster and returns its URL. It is left running when
/// the test process exits (its directory is under the temp dir).
fn start_cluster() -> Result<String, String> {
    let initdb = find_bin("initdb").ok_or("initdb not found")?;
    let pg_ctl = find_bin("pg_ctl").ok_or("pg_ctl not found")?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let dir = std::env::temp_dir().join(format!("drover-pg-{}-{port}", std::process::id()));
    let data = dir.join("data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    run(Command::new(&initdb).arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
    ]))?;
    let opts = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
        dir.display()
    );
    run(Command::new(&pg_ctl)
        .arg("-D")
        .arg(&data)
        .args(["-w", "-l"])
        .arg(dir.join("log"))
        .args(["-o", &opts, "start"]))?;
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    tracing::info!(%url, dir = %dir.display(), "started a throwaway PostgreSQL cluster for tests");
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
