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
static OWNER_URL: OnceCell<String> = OnceCell::const_new();

/// The login test installations are migrated and run by: not a superuser,
/// with `CREATEROLE` (to create each installation's roles) and `CREATE` on
/// the test database (to create schemas), as a production owner would be.
pub const TEST_OWNER: &str = "drover_test_owner";

/// The URL of a PostgreSQL server for tests.
///
/// Reads `DATABASE_URL` (default [`DATABASE_URL_DEFAULT`]). If no server
/// answers there, uses a throwaway cluster shared by every test process of
/// the machine: started once (under a file lock) from the machine's own
/// `initdb`/`pg_ctl` (on `PATH` or under `/usr/lib/postgresql/*/bin`) in
/// `$TMPDIR/drover-test-pg` on port [`FALLBACK_PORT`], trust authentication,
/// `fsync` off, and left running for the next test process. As root the cluster is run
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

/// The URL of [`pg_url`]'s server and database as the login `user`
/// (trust authentication in tests: no password).
pub fn url_as(url: &str, user: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{user}@{host}{tail}")
}

/// The URL of [`pg_url`]'s server as [`TEST_OWNER`], created on first use
/// (by the server's superuser login, so the test server's `DATABASE_URL`
/// must name one).
///
/// # Panics
/// When the login cannot be created or granted.
pub async fn pg_owner_url() -> String {
    OWNER_URL
        .get_or_init(|| async {
            let url = pg_url().await;
            let mut conn = sqlx::PgConnection::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
            // Test processes race to create it; either outcome leaves it.
            let create = format!(
                "DO $$ BEGIN \
                 IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{TEST_OWNER}') THEN \
                 CREATE ROLE {TEST_OWNER} LOGIN NOSUPERUSER CREATEROLE NOBYPASSRLS; END IF; \
                 EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            );
            sqlx::Executor::execute(&mut conn, create.as_str())
                .await
                .unwrap_or_else(|e| panic!("creating the test owner login: {e}"));
            // Under an advisory lock: two processes granting at once fail
            // with "tuple concurrently updated".
            // CREATE for the schemas; SET on drover.tenant_id because
            // migration 0002's function sets it in its SET clause, which
            // PostgreSQL lets only a superuser or a grantee create (the one
            // superuser step a non-superuser owner needs, README).
            let grant = format!(
                "DO $$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('drover test owner grant')); \
                 EXECUTE format('GRANT CREATE ON DATABASE %I TO {TEST_OWNER}', current_database()); \
                 GRANT SET ON PARAMETER drover.tenant_id TO {TEST_OWNER}; END $$"
            );
            sqlx::Executor::execute(&mut conn, grant.as_str())
                .await
                .unwrap_or_else(|e| panic!("granting the test owner CREATE: {e}"));
            let _ = conn.close().await;
            url_as(&url, TEST_OWNER)
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

/// A command for a PostgreSQL binary, run as `postgres` when we are root.
fn pg_command(bin: &PathBuf) -> Command {
    if super::cluster::is_root() {
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
        if super::cluster::is_root() {
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
        // Without fsync, as the fault scenarios' clusters
        // (`testing::cluster`): every test installation creates and drops
        // some 200 relations, and each drop flushes the WAL at commit.
        let opts = format!(
            "-p {FALLBACK_PORT} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c fsync=off",
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

/// Runs `cmd`; what it printed is the error when it fails.
fn run(cmd: &mut Command) -> Result<(), String> {
    super::cluster::run(cmd).map_err(|e| e.to_string())
}

/// `url` with `synchronous_commit = off` for its sessions, unless
/// `DROVER_TEST_SYNC_COMMIT` is `on`.
///
/// Why: a fresh test store's migrations commit some forty times, and the
/// contract cases commit after every call; on a shared CI machine each
/// commit's WAL flush waits behind every other test's. What these stores
/// test (the statements, their fences and their isolation) does not depend
/// on a commit surviving a server crash: the tests that crash or restart
/// the server run binaries over [`pg_owner_url`] itself, which keeps the
/// server's default.
pub fn without_commit_flush(url: &str) -> String {
    if std::env::var("DROVER_TEST_SYNC_COMMIT").is_ok_and(|v| v == "on") {
        return url.to_owned();
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20synchronous_commit%3Doff")
}

/// A fresh store in a new schema `drover_t_<random>`, migrated and empty,
/// and the schema's name (for [`pg_drop_schema`]). Connected, and migrated,
/// as [`TEST_OWNER`] (one login holding both roles, the simple default).
///
/// # Panics
/// When the server is unavailable or the migration fails.
pub async fn pg_fresh_store() -> (Arc<PgStore>, String) {
    let url = without_commit_flush(&pg_owner_url().await);
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

/// Drops a test schema, everything in it and its installation's roles. Logs, never panics: it runs
/// as cleanup after the assertions that matter.
pub async fn pg_drop_schema(url: &str, schema: &str) {
    if validate_schema(schema).is_err() {
        tracing::warn!(schema, "not dropping a schema with an invalid name");
        return;
    }
    let dropped = async {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        crate::store::postgres::drop_installation(&mut conn, schema).await?;
        conn.close().await?;
        Ok::<(), crate::Error>(())
    }
    .await;
    if let Err(e) = dropped {
        tracing::warn!(schema, error = %e, "dropping a test schema failed");
    }
}

/// The roles of the installation in `schema` of the database at `url`
/// (empty when it never reached migration 0005): read them before dropping a
/// test database, whose installation roles would outlive it, being
/// cluster-wide.
pub async fn pg_installation_roles(url: &str, schema: &str) -> Vec<String> {
    if validate_schema(schema).is_err() {
        return Vec::new();
    }
    let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
        return Vec::new();
    };
    let sql = format!("SELECT runtime_role, system_role FROM \"{schema}\".drover_roles()");
    let roles: Option<(String, String)> = sqlx::query_as(&sql)
        .fetch_optional(&mut conn)
        .await
        .ok()
        .flatten();
    let _ = conn.close().await;
    roles.map(|(r, s)| vec![r, s]).unwrap_or_default()
}

/// Drops `roles` (as [`pg_installation_roles`] named them) on the server of
/// the superuser `admin_url`, after their database is gone. Logs, never
/// panics.
pub async fn pg_drop_roles(admin_url: &str, roles: &[String]) {
    let Ok(mut conn) = sqlx::PgConnection::connect(admin_url).await else {
        tracing::warn!("cannot connect to drop test roles");
        return;
    };
    for role in roles {
        let sql = format!("DROP ROLE IF EXISTS \"{}\"", role.replace('"', "\"\""));
        if let Err(e) = sqlx::Executor::execute(&mut conn, sql.as_str()).await {
            tracing::warn!(%role, error = %e, "dropping a test role failed");
        }
    }
    let _ = conn.close().await;
}

/// As [`pg_fresh_store`], with the store in transaction-pooler mode
/// ([`PoolMode::Transaction`](crate::store::postgres::PoolMode)): unnamed
/// statements, every statement in an explicit transaction, no startup
/// options; session work over the same URL given as the direct one. Run by
/// the test owner, as [`pg_fresh_store`].
///
/// # Panics
/// As [`pg_fresh_store`].
pub async fn pg_fresh_pooled_store() -> (Arc<PgStore>, String) {
    let url = without_commit_flush(&pg_owner_url().await);
    let schema = format!("drover_t_{}", uuid::Uuid::new_v4().simple());
    let opts = PgOptions {
        schema: schema.clone(),
        max_connections: TEST_MAX_CONNECTIONS,
        pooler: crate::store::postgres::PoolerOptions {
            mode: crate::store::postgres::PoolMode::Transaction,
            direct_url: Some(url.clone()),
        },
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

/// A contract-suite [`Harness`] over a migrated PostgreSQL schema of its
/// own (a spare another case emptied, or a fresh one) with the store in
/// transaction-pooler mode; the harness's cleanup empties it for the next
/// case or drops it.
pub async fn pg_pooled_harness() -> Harness {
    let (store, schema) = reused_or_fresh(true).await;
    harness_over(store, schema, true).await
}

/// A contract-suite [`Harness`] over a migrated PostgreSQL schema of its
/// own (a spare another case emptied, or a fresh one); the harness's
/// cleanup empties it for the next case or drops it. Time passes by
/// sleeping (the database clock rules).
pub async fn pg_harness() -> Harness {
    let (store, schema) = reused_or_fresh(false).await;
    harness_over(store, schema, false).await
}

/// The contract harnesses' store: over a spare schema another case emptied
/// ([`super::spare`]), or, when none is free, over a fresh one registered
/// as a spare for later cases. `DROVER_TEST_SPARES=off` always migrates a
/// fresh schema (and drops it after), as the other helpers do.
async fn reused_or_fresh(pooled: bool) -> (Arc<PgStore>, String) {
    let admin = pg_url().await;
    let reuse = !std::env::var("DROVER_TEST_SPARES").is_ok_and(|v| v == "off");
    if reuse && let Some(schema) = super::spare::take(&admin).await {
        return (pg_peer_store(&schema, pooled).await, schema);
    }
    let (store, schema) = if pooled {
        pg_fresh_pooled_store().await
    } else {
        pg_fresh_store().await
    };
    if reuse {
        super::spare::register_spare(&admin, &schema).await;
    }
    (store, schema)
}

/// Another writer of `lane`'s fair-share passes in schema `schema`, in an
/// open transaction: the lane's version token moved and `tenant` charged
/// far ahead, uncommitted, the lane's row held. Returns the connection
/// (commit it to let a waiting claim on) and its backend pid (for
/// [`pg_until_blocked_by`]).
///
/// # Panics
/// When the server is unavailable.
pub async fn pg_fair_token_moving(
    url: &str,
    schema: &str,
    lane: &str,
    tenant: uuid::Uuid,
) -> (sqlx::PgConnection, i32) {
    use sqlx::{Connection, Executor};
    let mut other = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut other)
        .await
        .unwrap_or_else(|e| panic!("reading the backend pid: {e}"));
    let sql = format!(
        "SET search_path = \"{schema}\"; BEGIN;
         UPDATE fair_passes SET started = 42 WHERE lane = '{lane}'
           AND tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff';
         UPDATE fair_passes SET pass = pass + 1000000000000
         WHERE lane = '{lane}' AND tenant_id = '{tenant}'"
    );
    other
        .execute(sql.as_str())
        .await
        .unwrap_or_else(|e| panic!("moving the token: {e}"));
    (other, pid)
}

/// Returns once a session on `url`'s server waits for a lock the session
/// of backend `holder` holds (found by `pg_blocking_pids`, whatever the
/// waiting statement's text, which `pg_stat_activity` keeps only the
/// first kilobyte of).
///
/// # Panics
/// When the server is unavailable.
pub async fn pg_until_blocked_by(url: &str, holder: i32) {
    use sqlx::Connection;
    let mut watch = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(holder)
        .fetch_one(&mut watch)
        .await
        .unwrap_or_else(|e| panic!("reading pg_stat_activity: {e}"));
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Returns once a session on `url`'s server waits on a lock in a
/// statement whose text is `LIKE query_like`: how a test knows the
/// statement it started reached the lock another transaction holds.
///
/// # Panics
/// When the server is unavailable.
pub async fn pg_until_waiting_on_lock(url: &str, query_like: &str) {
    use sqlx::Connection;
    let mut watch = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND query LIKE $1",
        )
        .bind(query_like)
        .fetch_one(&mut watch)
        .await
        .unwrap_or_else(|e| panic!("reading pg_stat_activity: {e}"));
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A second store over the test schema `schema` (another process's view:
/// its own pools and caches), pooled or not as the harness's store.
///
/// # Panics
/// When the server is unavailable.
pub async fn pg_peer_store(schema: &str, pooled: bool) -> Arc<PgStore> {
    let url = pg_owner_url().await;
    let mut opts = PgOptions {
        schema: schema.to_owned(),
        max_connections: TEST_MAX_CONNECTIONS,
        ..PgOptions::default()
    };
    if pooled {
        opts.pooler = crate::store::postgres::PoolerOptions {
            mode: crate::store::postgres::PoolMode::Transaction,
            direct_url: Some(url.clone()),
        };
    }
    let store = PgStore::connect(&url, opts)
        .await
        .unwrap_or_else(|e| panic!("connecting a peer store to {url}: {e}"));
    Arc::new(store)
}

/// The harness both PostgreSQL modes share: `store` over `schema`, with the
/// in-transaction enqueue and outbox writes and a peer store over the same
/// schema (`pooled` as the store), dropping the schema at cleanup.
async fn harness_over(store: Arc<PgStore>, schema: String, pooled: bool) -> Harness {
    let url = pg_url().await;
    let tx_store = store.clone();
    let insert_in: crate::store::contract::InsertIn = Arc::new(move |item| {
        let store = tx_store.clone();
        Box::pin(async move {
            let mut tx = store.pool().begin().await?;
            let out = crate::store::postgres::insert_in(&mut tx, store.schema(), &item).await?;
            tx.commit().await?;
            Ok(out)
        })
    });
    let ob_store = store.clone();
    let outbox_in: crate::store::contract::OutboxIn = Arc::new(move |row, commit| {
        let store = ob_store.clone();
        Box::pin(async move {
            let mut tx = store.pool().begin().await?;
            crate::store::postgres::outbox_insert_in(&mut tx, store.schema(), &row).await?;
            if commit {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(())
        })
    });
    let store: Arc<dyn Store> = store;
    let peer_schema = schema.clone();
    let peer: crate::store::contract::Peer = Arc::new(move || {
        let schema = peer_schema.clone();
        Box::pin(async move {
            let peer: Arc<dyn Store> = pg_peer_store(&schema, pooled).await;
            peer
        })
    });
    Harness {
        insert_in: Some(insert_in),
        outbox_in: Some(outbox_in),
        peer: Some(peer),
        store,
        clock: None,
        cleanup: Some(Box::new(move || {
            Box::pin(async move {
                // A schema that is not a spare, or cannot be emptied
                // exactly, goes as before.
                if !super::spare::give_back(&url, &schema).await {
                    pg_drop_schema(&url, &schema).await;
                }
            })
        })),
    }
}
