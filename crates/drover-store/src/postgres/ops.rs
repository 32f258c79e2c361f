//! Migrations, maintenance (stale requeue, orphans, purge), operator writes
//! and the read side (listing, counts, gauges, audit, workers) on PostgreSQL.
//!
//! The cross-tenant calls here (`fail_orphaned`, `stale_tenants`, `purge`,
//! `counts`, `gauges`, unscoped `list`, the workers table) run as the system
//! role; everything else under the runtime role and one tenant.

use chrono::{DateTime, Utc};
use sqlx::{Executor, Row};
use uuid::Uuid;

use super::{PgStore, exponent_cap, row, secs, sql};
use crate::{AuditEntry, CountRow, Gauges, ListFilter, StaleReport, WorkerRow};
use drover_core::error::{Error, Result};
use drover_core::item::Item;
use drover_core::rules::RetryPolicy;

/// The embedded migrations, applied in order and recorded in the schema's own
/// `_sqlx_migrations` table.
use crate::migrations::embedded::POSTGRES as MIGRATIONS;

/// Creates the schema if missing, then applies the embedded migrations with
/// `search_path` pointing at it (so the migrations table lives in it too).
/// Idempotent. Concurrent migrations of one schema are serialized by a
/// session advisory lock of the schema's own ([`MigrationLocks`]), so
/// installations in other schemas of the database migrate side by side.
pub(super) async fn migrate(store: &PgStore) -> Result<()> {
    let schema = &store.schema;
    // The migrator sets a session search_path and takes a session advisory
    // lock: never through a transaction pooler.
    let Some(session) = store.session_pool() else {
        return Err(Error::Config(format!(
            "migrations need a session, and the database URL goes through a transaction \
             pooler: set {} to a direct URL",
            super::DIRECT_URL_VAR
        )));
    };
    let mut conn = session.acquire().await?;
    // Two processes creating the same schema at once race on the catalog's
    // unique index; either outcome leaves the schema in place.
    let create = format!(
        "DO $$ BEGIN CREATE SCHEMA IF NOT EXISTS \"{schema}\"; \
         EXCEPTION WHEN duplicate_schema OR unique_violation THEN NULL; END $$"
    );
    conn.execute(create.as_str()).await?;
    // Read before the session's search_path changes: nothing to undo if it fails.
    let mut migrator = crate::migrations::migrator(MIGRATIONS).await?;
    // sqlx's own lock is one per database: every schema's migration would
    // wait for every other's. Ours are taken below instead.
    migrator.set_locking(false);
    let locks = match MigrationLocks::take(&mut conn, schema).await {
        Ok(locks) => locks,
        Err(e) => {
            // Ending the session gives back whatever it took of the locks.
            conn.detach();
            return Err(e);
        }
    };
    // Session-wide on purpose, and undone below: the migrator runs its own
    // transactions, so a SET LOCAL would not reach them.
    let set_path = format!("SET search_path TO \"{schema}\"");
    let outcome = match conn.execute(set_path.as_str()).await {
        Ok(_) => migrator.run_direct(&mut *conn).await.map_err(Error::from),
        Err(e) => Err(e.into()),
    };
    let reset = conn.execute("RESET search_path").await;
    let unlocked = locks.release(&mut conn).await;
    if reset.is_err() || unlocked.is_err() {
        // Never hand a connection with a foreign search_path or a held
        // advisory lock back to the pool.
        conn.detach();
    }
    outcome?;
    reset?;
    unlocked?;
    tracing::debug!(schema = %schema, "postgres migrations applied");
    Ok(())
}

/// The session advisory locks a migration holds.
///
/// - The schema's own key, exclusive: one migration of a schema at a time.
/// - The key sqlx's migrator takes for the whole database, *shared*: a
///   binary that still takes sqlx's lock exclusively (an older drover in a
///   rolling upgrade) waits for every migration of ours and they for it.
///   When this login is not yet a member of the cluster-wide
///   `drover_runtime` and `drover_system` roles, migration 0001 grants them,
///   and two grants of one membership at once collide in the catalog: that
///   first migration takes the database's key exclusively.
struct MigrationLocks {
    database: i64,
    database_exclusive: bool,
    schema: String,
}

impl MigrationLocks {
    /// Takes both locks, waiting for them. On an error the caller ends the
    /// session (detaches the connection), which gives back what was taken.
    async fn take(conn: &mut sqlx::PgConnection, schema: &str) -> Result<Self> {
        let database: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(&mut *conn)
            .await?;
        let database = sqlx_lock_id(&database);
        let members: bool = sqlx::query_scalar(
            "SELECT count(*) = 2 FROM pg_roles r \
             WHERE r.rolname IN ('drover_runtime', 'drover_system') \
               AND pg_has_role(current_user, r.oid, 'MEMBER')",
        )
        .fetch_one(&mut *conn)
        .await?;
        let take_database = if members {
            "SELECT pg_advisory_lock_shared($1)"
        } else {
            "SELECT pg_advisory_lock($1)"
        };
        sqlx::query(take_database)
            .bind(database)
            .execute(&mut *conn)
            .await?;
        sqlx::query(sql::MIGRATE_LOCK_SCHEMA)
            .bind(schema)
            .execute(&mut *conn)
            .await?;
        Ok(MigrationLocks {
            database,
            database_exclusive: !members,
            schema: schema.to_owned(),
        })
    }

    async fn unlock_database(&self, conn: &mut sqlx::PgConnection) -> Result<()> {
        let unlock = if self.database_exclusive {
            "SELECT pg_advisory_unlock($1)"
        } else {
            "SELECT pg_advisory_unlock_shared($1)"
        };
        sqlx::query(unlock)
            .bind(self.database)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn release(self, conn: &mut sqlx::PgConnection) -> Result<()> {
        let schema = sqlx::query(sql::MIGRATE_UNLOCK_SCHEMA)
            .bind(&self.schema)
            .execute(&mut *conn)
            .await;
        let database = self.unlock_database(conn).await;
        schema?;
        database
    }
}

/// The key sqlx's PostgreSQL migrator locks a database with (its
/// `generate_lock_id`, taken exclusively by drover binaries before the
/// per-schema lock): CRC-32 (ISO-HDLC) of the database's name times a
/// constant of sqlx's.
pub fn sqlx_lock_id(database: &str) -> i64 {
    const CRC_32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    0x3d32_ad9e * i64::from(CRC_32.checksum(database.as_bytes()))
}

/// Where the schema's migrations stand. Runs as the login (which owns the
/// migrations table), outside any role switch, over the simple protocol.
pub(super) async fn migration_status(store: &PgStore) -> Result<crate::MigrationStatus> {
    let embedded = crate::MigrationStatus::embedded_by(MIGRATIONS);
    let sql = sql::MIGRATIONS_STATUS.replace("{schema}", &store.schema);
    let rows = match store.pool.fetch_all(sql.as_str()).await {
        Ok(rows) => rows,
        // undefined_function: migrated by a binary older than 0013 (or not
        // at all); the table itself answers for the owner's login.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42883") => {
            let sql = sql::MIGRATIONS_STATUS_TABLE.replace("{schema}", &store.schema);
            match store.pool.fetch_all(sql.as_str()).await {
                Ok(rows) => rows,
                // undefined_table: the schema was never migrated.
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => Vec::new(),
                Err(e) => return Err(e.into()),
            }
        }
        // invalid_schema_name: no schema yet, so nothing migrated.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3F000") => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let recorded = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get::<i64, _>("version")?,
                r.try_get::<bool, _>("success")?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(crate::MigrationStatus::of(&embedded, &recorded))
}

/// Fails an orphaned item (system role), conditioned on its token.
pub(super) async fn fail_orphaned(store: &PgStore, id: Uuid, token: Uuid) -> Result<()> {
    let mut tx = store.begin_system().await?;
    let n = sqlx::query(sql::ITEM_FAIL_ORPHANED)
        .persistent(store.persistent)
        .bind(id)
        .bind(token)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        let status: Option<String> = sqlx::query_scalar(sql::ITEM_STATUS)
            .persistent(store.persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        return Err(match status {
            Some(s) => Error::Conflict(format!(
                "orphan failure of item {id} refused: it is {s}, or the claim token no longer holds"
            )),
            None => Error::NotFound(format!("item {id}")),
        });
    }
    tx.commit().await?;
    tracing::warn!(item = %id, "item failed as orphaned: its tenant is gone");
    Ok(())
}

/// Tenants with lease-expired claims (system role).
pub(super) async fn stale_tenants(store: &PgStore, limit: u32) -> Result<Vec<Uuid>> {
    let mut tx = store.begin_system().await?;
    let tenants = sqlx::query_scalar(sql::ITEM_STALE_TENANTS)
        .persistent(store.persistent)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(tenants)
}

/// One tenant's lease-expired claims handed back as failed attempts, in one
/// conditional statement.
pub(super) async fn requeue_stale(
    store: &PgStore,
    tenant: Uuid,
    limit: u32,
    policy: &RetryPolicy,
) -> Result<StaleReport> {
    if limit == 0 {
        return Ok(StaleReport::default());
    }
    let mut tx = store.begin_tenant(tenant).await?;
    let r = sqlx::query(sql::ITEM_REQUEUE_STALE)
        .persistent(store.persistent)
        .bind(i64::from(limit))
        .bind(secs(policy.cap))
        .bind(secs(policy.base))
        .bind(policy.factor)
        .bind(exponent_cap(policy))
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let requeued: i64 = r.try_get("requeued")?;
    let dead: i64 = r.try_get("dead_lettered")?;
    let report = StaleReport {
        requeued: u64::try_from(requeued).unwrap_or(0),
        dead_lettered: u64::try_from(dead).unwrap_or(0),
    };
    if report != StaleReport::default() {
        tracing::info!(tenant = %tenant, requeued = report.requeued,
            dead_lettered = report.dead_lettered, "stale claims handed back");
    }
    Ok(report)
}

/// An operator's cancel or retry: one statement that changes the item and
/// writes its audit entry, under the tenant.
pub(super) async fn operator_write(
    store: &PgStore,
    statement: &'static str,
    what: &str,
    tenant: Uuid,
    id: Uuid,
    actor: Uuid,
) -> Result<Item> {
    let mut tx = store.begin_tenant(tenant).await?;
    let r = sqlx::query(statement)
        .persistent(store.persistent)
        .bind(id)
        .bind(actor)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(r) = r else {
        let status: Option<String> = sqlx::query_scalar(sql::ITEM_STATUS)
            .persistent(store.persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        return Err(match status {
            Some(s) => Error::Conflict(format!("cannot {what} item {id}: it is {s}")),
            None => Error::NotFound(format!("item {id}")),
        });
    };
    tx.commit().await?;
    row::item(&r)
}

/// Lists items, newest first: under the tenant when the filter names one,
/// across tenants (system role) otherwise.
pub(super) async fn list(store: &PgStore, f: &ListFilter) -> Result<Vec<Item>> {
    let mut tx = match f.tenant_id {
        Some(t) => store.begin_tenant(t).await?,
        None => store.begin_system().await?,
    };
    // Unprepared: planned with the filter's values, so the unused filters
    // fold away, a status filter becomes `status = 'failed'` that proves a
    // partial index's predicate (items_stopped_list for the dead letter,
    // items_claim, items_tenant_stale), and the planner sees an ORDER BY id
    // DESC LIMIT it can walk an index for. A generic plan of the same text
    // guesses one row for the conjunction of "$n IS NULL OR ..." terms and
    // sorts a full scan.
    let rows = sqlx::query(sql::ITEM_LIST)
        .persistent(false)
        .bind(f.status.map(|s| s.as_str()))
        .bind(f.lane.as_deref())
        .bind(f.kind.as_deref())
        .bind(i64::from(f.limit))
        .bind(f.key.as_deref())
        .bind(f.created_after)
        .bind(f.created_before)
        .bind(f.error_contains.as_deref())
        .bind(f.after.map(|c| c.id))
        .bind(f.group.as_deref())
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter().map(row::item).collect()
}

/// The mark row is written by migration 0020 and never deleted.
fn missing_mark() -> Error {
    Error::Config("the count rollup's mark row is missing (migration 0020)".into())
}

/// The count rollup's mark, read in `tx`, with JIT compilation off for
/// the rest of it: the count statements' cost estimates (a backlog of
/// pending rows) pass `jit_above_cost`, and compiling them took a second
/// and a half at ten million rows, for statements that run in milliseconds.
async fn counts_mark(
    store: &PgStore,
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
) -> Result<DateTime<Utc>> {
    (&mut **tx).execute("SET LOCAL jit = off").await?;
    let mark: Option<DateTime<Utc>> = sqlx::query_scalar(sql::COUNTS_MARK)
        .persistent(store.persistent)
        .fetch_optional(&mut **tx)
        .await?;
    mark.ok_or_else(missing_mark)
}

/// Items per lane, kind and status, of every lane or of one (system role):
/// the rollup, the final rows not settled yet, and the pending and claimed
/// rows, in one statement (see counts.sql).
pub(super) async fn counts(store: &PgStore, lane: Option<&str>) -> Result<Vec<CountRow>> {
    let mut tx = store.begin_system().await?;
    let mark = counts_mark(store, &mut tx).await?;
    // Unprepared: planned with the mark's value, so the planner sees how
    // short the unsettled range is (a generic plan would guess a third of
    // the table).
    let rows = sqlx::query(sql::COUNTS)
        .persistent(false)
        .bind(mark)
        .bind(lane)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| {
            Ok(CountRow {
                lane: r.try_get("lane")?,
                kind: r.try_get("kind")?,
                status: row::status(r.try_get("status")?)?,
                count: r.try_get("count")?,
            })
        })
        .collect()
}

/// Counts per lane, kind and status of one tenant (system role): the
/// parts of [`counts`], each narrowed to the tenant.
pub(super) async fn counts_tenant(store: &PgStore, tenant: Uuid) -> Result<Vec<CountRow>> {
    let mut tx = store.begin_system().await?;
    let mark = counts_mark(store, &mut tx).await?;
    // Unprepared, as the counts are, for the same reason.
    let rows = sqlx::query(sql::COUNTS_TENANT)
        .persistent(false)
        .bind(mark)
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| {
            Ok(CountRow {
                lane: r.try_get("lane")?,
                kind: r.try_get("kind")?,
                status: row::status(r.try_get("status")?)?,
                count: r.try_get("count")?,
            })
        })
        .collect()
}

/// Folds the final rows settled since the last call into the count rollup
/// (system role; the sweep's step). Returns how many rows it folded in.
pub(super) async fn counts_settle(store: &PgStore) -> Result<u64> {
    let mut tx = store.begin_system().await?;
    (&mut *tx).execute("SET LOCAL jit = off").await?;
    let r = sqlx::query(sql::COUNTS_SETTLE_BEGIN)
        .persistent(store.persistent)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(r) = r else {
        return Err(missing_mark());
    };
    let from: DateTime<Utc> = r.try_get("settled_to")?;
    let upto: DateTime<Utc> = r.try_get("upto")?;
    if upto <= from {
        // An open transaction older than the mark holds it back.
        tx.commit().await?;
        return Ok(0);
    }
    let r = sqlx::query(sql::COUNTS_SETTLE)
        .persistent(false)
        .bind(from)
        .bind(upto)
        // The dashboard's minutes keep two days (migration 0041).
        .bind(upto - crate::throughput::THROUGHPUT_KEEP)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let settled: i64 = r.try_get("settled")?;
    let unfinal: i64 = r.try_get("unfinal")?;
    tracing::debug!(settled, unfinal, upto = %upto, "count rollup settled");
    Ok(u64::try_from(settled).unwrap_or(0))
}

/// The health gauges (system role), read in one transaction.
pub(super) async fn gauges(store: &PgStore) -> Result<Gauges> {
    let mut tx = store.begin_system().await?;
    let mark = counts_mark(store, &mut tx).await?;
    let rows = sqlx::query(sql::GAUGES_OLDEST)
        .persistent(store.persistent)
        .fetch_all(&mut *tx)
        .await?;
    let failed: i64 = sqlx::query_scalar(sql::GAUGES_FAILED)
        .persistent(false)
        .bind(mark)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let oldest_age_seconds = rows
        .iter()
        .map(|r| Ok((r.try_get("lane")?, r.try_get("age")?)))
        .collect::<Result<Vec<(String, f64)>>>()?;
    Ok(Gauges {
        oldest_age_seconds,
        failed,
    })
}

/// One item's audit entries, oldest first (under the tenant).
pub(super) async fn audit_list(
    store: &PgStore,
    tenant: Uuid,
    item: Uuid,
) -> Result<Vec<AuditEntry>> {
    let mut tx = store.begin_tenant(tenant).await?;
    let rows = sqlx::query(sql::AUDIT_LIST)
        .persistent(store.persistent)
        .bind(item)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter().map(row::audit).collect()
}

/// Upserts a worker's liveness row (system role).
pub(super) async fn worker_beat(store: &PgStore, w: &WorkerRow) -> Result<()> {
    let mut tx = store.begin_system().await?;
    sqlx::query(sql::WORKER_BEAT)
        .persistent(store.persistent)
        .bind(&w.id)
        .bind(&w.host)
        .bind(w.pid)
        .bind(&w.lanes)
        .bind(w.capacity)
        .bind(w.started_at)
        .bind(&w.state)
        .bind(w.beat_interval_ms.max(1))
        .bind(&w.kinds)
        .bind(&w.version)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Worker rows, most recent beat first (system role).
pub(super) async fn worker_list(store: &PgStore) -> Result<Vec<WorkerRow>> {
    let mut tx = store.begin_system().await?;
    let rows = sqlx::query(sql::WORKER_LIST)
        .persistent(store.persistent)
        .bind(i32::try_from(crate::LOST_AFTER_BEATS).unwrap_or(i32::MAX))
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter().map(row::worker).collect()
}

/// Deletes long-dead workers' rows (system role).
pub(super) async fn worker_purge(store: &PgStore, older_than: std::time::Duration) -> Result<u64> {
    let mut tx = store.begin_system().await?;
    let n = sqlx::query(sql::WORKER_PURGE)
        .persistent(store.persistent)
        .bind(older_than.as_secs_f64())
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n > 0 {
        tracing::info!(purged = n, "long-dead worker rows purged");
    }
    Ok(n)
}
