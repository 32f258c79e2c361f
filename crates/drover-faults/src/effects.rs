//! The side-effect tables the fault suite reads, and the handler's writes.
//!
//! | table | written by | what it records |
//! |---|---|---|
//! | `starts` | the handler, unfenced, first thing | every handler start: `(op_id, item_id, fencing_token, attempt, pid)` |
//! | `effects` | the handler, fenced | one row per `op_id`: the token of the last accepted write |
//! | `effect_log` | the handler, in the same statement as the fenced write | every write attempt: did the claim hold, did a row change |
//! | `saga_effects` | the `effects.saga` workflow's steps | one row per (orchestration, step, version) the step's effect was applied at |
//! | `transitions` | a trigger on `items` | every update of a queue row: old/new status, claim number, holder, lease, and (PostgreSQL) which process wrote it |
//! | `runs` | the `effects.grouped` handler ([`runs`]) | every run: `(item_id, group_key, fencing_token, pid, started_at, ended_at, outcome)` |
//! | `enqueue_order` | the scenario, as it enqueues | each grouped item's place in its group's enqueue order |
//!
//! The fenced write changes a row only when both fences hold, checked in
//! the statement itself: the item's current claim carries the writer's
//! fencing number and its lease has not passed (locked `FOR SHARE` on
//! PostgreSQL, so a sweep cannot hand the item back under the write), and
//! the stored token is lower than the writer's. The claim check closes the
//! window a monotonic token alone leaves open: a stale holder writing before
//! the new holder's first write. A retried write with the same token changes
//! nothing and reports the claim as held, so a write whose commit reply was
//! lost can simply be retried.

use sqlx::{PgPool, Row, SqlitePool};
use uuid::Uuid;

pub mod runs;

/// `starts`, `effects`, `effect_log` and the `transitions` trigger, in a
/// migrated drover schema on PostgreSQL.
pub fn pg_setup_sql(schema: &str) -> String {
    format!(
        r#"
SET search_path TO "{schema}";
CREATE SEQUENCE fault_seq;
CREATE TABLE starts (
    seq bigint PRIMARY KEY DEFAULT nextval('fault_seq'),
    op_id text NOT NULL, item_id uuid NOT NULL, fencing_token bigint NOT NULL,
    attempt int NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX starts_item ON starts (item_id);
CREATE TABLE effects (
    op_id text PRIMARY KEY, item_id uuid NOT NULL, fencing_token bigint NOT NULL,
    pid int NOT NULL, writes int NOT NULL DEFAULT 1);
CREATE TABLE effect_log (
    seq bigint PRIMARY KEY DEFAULT nextval('fault_seq'),
    op_id text NOT NULL, item_id uuid NOT NULL, fencing_token bigint NOT NULL, pid int NOT NULL,
    claim_ok bool NOT NULL, changed bool NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX effect_log_item ON effect_log (item_id);
CREATE TABLE transitions (
    seq bigint PRIMARY KEY DEFAULT nextval('fault_seq'),
    item_id uuid NOT NULL, old_status text, new_status text, old_seq bigint, new_seq bigint,
    old_holder text, new_holder text, old_lease timestamptz, new_lease timestamptz,
    attempts int, available_at timestamptz, updated_at timestamptz, last_error text,
    writer text, tx_now timestamptz, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX transitions_item ON transitions (item_id);
CREATE TABLE saga_effects (
    orchestration_id uuid NOT NULL, step text NOT NULL, version bigint NOT NULL, pid int NOT NULL,
    PRIMARY KEY (orchestration_id, step, version));
CREATE TABLE runs (
    id bigint PRIMARY KEY DEFAULT nextval('fault_seq'),
    item_id uuid NOT NULL, group_key text, fencing_token bigint NOT NULL, pid int NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz, outcome text);
CREATE TABLE enqueue_order (item_id uuid PRIMARY KEY, group_key text NOT NULL, pos int NOT NULL);
CREATE FUNCTION log_transition() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = "{schema}" AS $$
BEGIN
    INSERT INTO transitions (item_id, old_status, new_status, old_seq, new_seq, old_holder,
        new_holder, old_lease, new_lease, attempts, available_at, updated_at, last_error, writer, tx_now)
    VALUES (NEW.id, OLD.status, NEW.status, OLD.claim_seq, NEW.claim_seq, OLD.claimed_by,
        NEW.claimed_by, OLD.lease_expires_at, NEW.lease_expires_at, NEW.attempts, NEW.available_at,
        NEW.updated_at, NEW.last_error, current_setting('application_name'), now());
    RETURN NULL;
END $$;
CREATE TRIGGER items_transitions AFTER UPDATE ON items FOR EACH ROW EXECUTE FUNCTION log_transition();
"#
    )
}

/// The same tables in a migrated drover SQLite file. Times are
/// microseconds since the epoch, as drover's own columns.
pub const SQLITE_SETUP: &str = r#"
CREATE TABLE IF NOT EXISTS starts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op_id TEXT NOT NULL, item_id BLOB NOT NULL, fencing_token INTEGER NOT NULL,
    attempt INTEGER NOT NULL, pid INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS starts_item ON starts (item_id);
CREATE TABLE IF NOT EXISTS effects (
    op_id TEXT PRIMARY KEY, item_id BLOB NOT NULL, fencing_token INTEGER NOT NULL,
    pid INTEGER NOT NULL, writes INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS effect_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op_id TEXT NOT NULL, item_id BLOB NOT NULL, fencing_token INTEGER NOT NULL, pid INTEGER NOT NULL,
    claim_ok INTEGER NOT NULL, changed INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id BLOB NOT NULL, old_status TEXT, new_status TEXT, old_seq INTEGER, new_seq INTEGER,
    old_holder TEXT, new_holder TEXT, old_lease INTEGER, new_lease INTEGER,
    attempts INTEGER, available_at INTEGER, updated_at INTEGER, last_error TEXT,
    writer TEXT, tx_now INTEGER, at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)));
CREATE INDEX IF NOT EXISTS transitions_item ON transitions (item_id);
CREATE TABLE IF NOT EXISTS saga_effects (
    orchestration_id BLOB NOT NULL, step TEXT NOT NULL, version INTEGER NOT NULL, pid INTEGER NOT NULL,
    PRIMARY KEY (orchestration_id, step, version));
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id BLOB NOT NULL, group_key TEXT, fencing_token INTEGER NOT NULL, pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    ended_at INTEGER, outcome TEXT);
CREATE TABLE IF NOT EXISTS enqueue_order (item_id BLOB PRIMARY KEY, group_key TEXT NOT NULL, pos INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS items_transitions AFTER UPDATE ON items FOR EACH ROW BEGIN
    INSERT INTO transitions (item_id, old_status, new_status, old_seq, new_seq, old_holder,
        new_holder, old_lease, new_lease, attempts, available_at, updated_at, last_error, tx_now)
    VALUES (NEW.id, OLD.status, NEW.status, OLD.claim_seq, NEW.claim_seq, OLD.claimed_by,
        NEW.claimed_by, OLD.lease_expires_at, NEW.lease_expires_at, NEW.attempts, NEW.available_at,
        NEW.updated_at, NEW.last_error, NEW.updated_at);
END;
"#;

/// Where the handler writes its effects.
#[derive(Debug, Clone)]
pub enum EffectsDb {
    /// PostgreSQL: its own pool (not drover's), tables in `schema`.
    Pg {
        /// The handler's pool.
        pool: PgPool,
        /// The schema of the drover tables and the effect tables.
        schema: String,
    },
    /// SQLite: its own connection to the file drover uses.
    Sqlite(SqlitePool),
}

/// What one fenced write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// The item's current claim carried the writer's fencing number, live.
    pub claim_ok: bool,
    /// A row of `effects` changed.
    pub changed: bool,
}

/// What the handler knows of its run.
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    /// The operation id from the payload.
    pub op_id: &'a str,
    /// The item.
    pub item_id: Uuid,
    /// `cx.fencing_token()`.
    pub token: i64,
    /// `cx.attempt()`.
    pub attempt: i32,
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl EffectsDb {
    /// A saga step's effect, keyed on the record's version the step ran
    /// against: a re-run of the same step (after a kill) meets its own row
    /// and changes nothing; a step run at two versions would leave two.
    /// Returns whether a row was written.
    ///
    /// # Errors
    /// The database's; the write is idempotent, so the caller may retry.
    pub async fn saga_effect(
        &self,
        orchestration: Uuid,
        step: &str,
        version: i64,
    ) -> Result<bool, sqlx::Error> {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let n = match self {
            EffectsDb::Pg { pool, schema } => {
                let sql = format!(
                    r#"INSERT INTO "{schema}".saga_effects (orchestration_id, step, version, pid) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"#
                );
                sqlx::query(&sql)
                    .bind(orchestration)
                    .bind(step)
                    .bind(version)
                    .bind(pid)
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            EffectsDb::Sqlite(pool) => sqlx::query(
                "INSERT INTO saga_effects (orchestration_id, step, version, pid) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            )
            .bind(orchestration.as_bytes().to_vec())
            .bind(step)
            .bind(version)
            .bind(pid)
            .execute(pool)
            .await?
            .rows_affected(),
        };
        Ok(n == 1)
    }

    /// Records a handler start (unfenced).
    ///
    /// # Errors
    /// The database's.
    pub async fn log_start(&self, op: Op<'_>) -> Result<(), sqlx::Error> {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        match self {
            EffectsDb::Pg { pool, schema } => {
                let sql = format!(
                    r#"INSERT INTO "{schema}".starts (op_id, item_id, fencing_token, attempt, pid) VALUES ($1, $2, $3, $4, $5)"#
                );
                sqlx::query(&sql)
                    .bind(op.op_id)
                    .bind(op.item_id)
                    .bind(op.token)
                    .bind(op.attempt)
                    .bind(pid)
                    .execute(pool)
                    .await?;
            }
            EffectsDb::Sqlite(pool) => {
                sqlx::query("INSERT INTO starts (op_id, item_id, fencing_token, attempt, pid, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                    .bind(op.op_id)
                    .bind(op.item_id.as_bytes().to_vec())
                    .bind(op.token)
                    .bind(op.attempt)
                    .bind(pid)
                    .bind(now_us())
                    .execute(pool)
                    .await?;
            }
        }
        Ok(())
    }

    /// The fenced write (see the module docs), logged in `effect_log`.
    ///
    /// # Errors
    /// The database's; the write is idempotent, so the caller may retry.
    pub async fn write(&self, op: Op<'_>) -> Result<WriteResult, sqlx::Error> {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        match self {
            EffectsDb::Pg { pool, schema } => {
                let sql = format!(
                    r#"
WITH claim AS (
    SELECT 1 FROM "{schema}".items
    WHERE id = $2 AND claim_seq = $3 AND status = 'claimed' AND lease_expires_at > now()
    FOR SHARE
), w AS (
    INSERT INTO "{schema}".effects AS e (op_id, item_id, fencing_token, pid)
    SELECT $1, $2, $3, $4 FROM claim
    ON CONFLICT (op_id) DO UPDATE
        SET item_id = EXCLUDED.item_id, fencing_token = EXCLUDED.fencing_token,
            pid = EXCLUDED.pid, writes = e.writes + 1
        WHERE e.fencing_token < EXCLUDED.fencing_token
    RETURNING 1
)
INSERT INTO "{schema}".effect_log (op_id, item_id, fencing_token, pid, claim_ok, changed)
SELECT $1, $2, $3, $4, EXISTS (SELECT 1 FROM claim), EXISTS (SELECT 1 FROM w)
RETURNING claim_ok, changed"#
                );
                let row = sqlx::query(&sql)
                    .bind(op.op_id)
                    .bind(op.item_id)
                    .bind(op.token)
                    .bind(pid)
                    .fetch_one(pool)
                    .await?;
                Ok(WriteResult {
                    claim_ok: row.try_get("claim_ok")?,
                    changed: row.try_get("changed")?,
                })
            }
            EffectsDb::Sqlite(pool) => {
                // Its own task: the executor drops a handler whose lease is
                // lost, and a SQLite transaction cancelled inside BEGIN can
                // leave its connection holding the file's write lock.
                let (pool, op_id) = (pool.clone(), op.op_id.to_owned());
                let (item_id, token) = (op.item_id, op.token);
                tokio::spawn(async move { sqlite_write(&pool, &op_id, item_id, token, pid).await })
                    .await
                    .map_err(|e| sqlx::Error::Protocol(format!("effects write task: {e}")))?
            }
        }
    }
}

async fn sqlite_write(
    pool: &SqlitePool,
    op_id: &str,
    item_id: Uuid,
    token: i64,
    pid: i32,
) -> Result<WriteResult, sqlx::Error> {
    let op = Op {
        op_id,
        item_id,
        token,
        attempt: 0,
    };
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let id = op.item_id.as_bytes().to_vec();
    let now = now_us();
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM items WHERE id = ?1 AND claim_seq = ?2 \
                     AND status = 'claimed' AND lease_expires_at > ?3",
    )
    .bind(&id)
    .bind(op.token)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let claim_ok = held > 0;
    let mut changed = false;
    if claim_ok {
        let r = sqlx::query(
                        "INSERT INTO effects (op_id, item_id, fencing_token, pid) VALUES (?1, ?2, ?3, ?4) \
                         ON CONFLICT (op_id) DO UPDATE SET item_id = excluded.item_id, \
                         fencing_token = excluded.fencing_token, pid = excluded.pid, writes = effects.writes + 1 \
                         WHERE effects.fencing_token < excluded.fencing_token",
                    )
                    .bind(op.op_id)
                    .bind(&id)
                    .bind(op.token)
                    .bind(pid)
                    .execute(&mut *tx)
                    .await?;
        changed = r.rows_affected() > 0;
    }
    sqlx::query(
        "INSERT INTO effect_log (op_id, item_id, fencing_token, pid, claim_ok, changed, at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .bind(op.op_id)
    .bind(&id)
    .bind(op.token)
    .bind(pid)
    .bind(claim_ok)
    .bind(changed)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(WriteResult { claim_ok, changed })
}
