//! `drover bench --bounds` (PostgreSQL): the raw bounds of the standard
//! workload, measured after its phases in the same sandbox, so drover's
//! enqueue and drain rates can be read as fractions of what plain SQL on
//! the same server does with rows of the same shape. This module owns the
//! raw table and every statement run on it.
//!
//! 1. **Raw insert**: `raw_items`, made `LIKE items INCLUDING DEFAULTS`
//!    (the same columns; no trigger, no policy, no check) with a primary
//!    key on `id` and one partial index on the pending rows in claim order
//!    `(lane, priority, available_at)`, storage `fillfactor = 80` as the
//!    items partitions have. N (`--jobs`) rows of `{"n": i}` with UUIDv7
//!    ids, [`INSERT_BATCH`] per `INSERT … SELECT FROM unnest(…)` statement
//!    writing the columns drover's enqueue writes, one session, statements
//!    in sequence (each its own transaction). `rows / wall time`.
//! 2. **Raw drain**: with those N rows pending, [`DRAIN_SESSIONS`] sessions
//!    in parallel, each looping: one transaction claiming [`CLAIM_BATCH`]
//!    (`UPDATE … WHERE id IN (SELECT id … WHERE status = 'pending' ORDER
//!    BY priority, available_at LIMIT 500 FOR UPDATE SKIP LOCKED) RETURNING
//!    id`, setting what a claim sets), then one transaction marking them
//!    done (`UPDATE … SET status = 'done' … WHERE id = ANY($1)`), until a
//!    claim finds none. `rows / wall time`; every row must be done after.
//!
//! Each statement runs alone, so it is its own transaction, committed (and
//! flushed: `synchronous_commit` as the server has it) when it returns.
//! The raw table lives in the sandbox schema and goes with it.

use std::time::Instant;

use sqlx::PgPool;
use uuid::Uuid;

use crate::report::bounds::BoundsFigures;
use crate::target::Target;
use crate::{BenchConfig, BenchError, KIND, LANE, Progress};

/// Rows per raw insert statement (`BENCH.md`'s bulk call).
pub const INSERT_BATCH: usize = 1_000;
/// Sessions of the raw drain.
pub const DRAIN_SESSIONS: usize = 2;
/// Rows per raw claim.
pub const CLAIM_BATCH: usize = 500;

/// The raw table: the columns of drover's items, a primary key and the
/// claim index, nothing else.
const CREATE: [&str; 3] = [
    "CREATE TABLE raw_items (LIKE items INCLUDING DEFAULTS) WITH (fillfactor = 80)",
    "ALTER TABLE raw_items ADD PRIMARY KEY (id)",
    "CREATE INDEX raw_items_claim ON raw_items (lane, priority, available_at) \
     WHERE status = 'pending'",
];

/// The rows of one bulk enqueue, with the columns `item_insert_many.sql`
/// writes (the optional ones are null for the bench's items).
const INSERT: &str = "\
INSERT INTO raw_items (
    id, tenant_id, kind, lane, payload, priority, status, available_at,
    attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by
)
SELECT u.id, $1, $2, $3, u.payload::jsonb, 0, 'pending', now(),
       0, 5, 0, $4, now(), now(), $4
FROM unnest($5::uuid[], $6::text[]) AS u(id, payload)";

/// One claim of up to `$3` pending rows of lane `$2` in claim order, by
/// holder `$1`.
const CLAIM: &str = "\
UPDATE raw_items
SET status = 'claimed', claimed_by = $1, claim_token = gen_random_uuid(),
    lease_expires_at = now() + interval '30 seconds', attempts = attempts + 1,
    claim_seq = claim_seq + 1, updated_at = now()
WHERE id IN (
    SELECT id FROM raw_items
    WHERE status = 'pending' AND lane = $2 AND available_at <= now()
    ORDER BY priority, available_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
RETURNING id";

/// The claimed rows `$1` marked done, their claim cleared.
const DONE: &str = "\
UPDATE raw_items
SET status = 'done', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
    updated_at = now()
WHERE id = ANY($1)";

/// Rows done after the drain.
const COUNT_DONE: &str = "SELECT count(*) FROM raw_items WHERE status = 'done'";

/// Measures both bounds in `target`'s schema and sets drover's ratios from
/// the standard phases' `enqueue_rate` and `drain_rate`.
///
/// # Errors
/// Database errors; [`BenchError::Incomplete`] when rows are left undone.
pub(crate) async fn run(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    enqueue_rate: Option<f64>,
    drain_rate: Option<f64>,
) -> Result<BoundsFigures, BenchError> {
    let admin = target.admin()?;
    for stmt in CREATE {
        sqlx::query(stmt).execute(admin).await?;
    }
    let rows = config.jobs;
    let raw_insert_s = insert(admin, rows).await?;
    progress.note(&format!(
        "raw insert: {rows} rows in {raw_insert_s:.2} s ({:.0}/s)",
        rows as f64 / raw_insert_s
    ));
    let (raw_drain_s, claims) = drain(admin).await?;
    let rows_done: i64 = sqlx::query_scalar(COUNT_DONE).fetch_one(admin).await?;
    progress.note(&format!(
        "raw drain: {rows_done} rows in {raw_drain_s:.2} s ({:.0}/s)",
        rows as f64 / raw_drain_s
    ));
    if u64::try_from(rows_done).ok() != Some(rows) {
        return Err(BenchError::Incomplete(format!(
            "the raw drain left {} of {rows} rows undone",
            rows.saturating_sub(u64::try_from(rows_done).unwrap_or(0))
        )));
    }
    let raw_insert_rate = rows as f64 / raw_insert_s;
    let raw_drain_rate = rows as f64 / raw_drain_s;
    Ok(BoundsFigures {
        rows,
        insert_batch: INSERT_BATCH,
        raw_insert_s,
        raw_insert_rate,
        drain_sessions: DRAIN_SESSIONS,
        claim_batch: CLAIM_BATCH,
        raw_drain_s,
        raw_drain_rate,
        claims,
        rows_done,
        enqueue_ratio: enqueue_rate.map(|r| r / raw_insert_rate),
        drain_ratio: drain_rate.map(|r| r / raw_drain_rate),
    })
}

/// Inserts `rows` rows, [`INSERT_BATCH`] per statement, on one connection:
/// the wall time, s.
async fn insert(admin: &PgPool, rows: u64) -> Result<f64, BenchError> {
    let mut conn = admin.acquire().await?;
    let nil = Uuid::nil();
    let t0 = Instant::now();
    let mut next = 0u64;
    while next < rows {
        let n = (rows - next).min(INSERT_BATCH as u64);
        let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
        let payloads: Vec<String> = (next..next + n).map(|i| format!("{{\"n\":{i}}}")).collect();
        sqlx::query(INSERT)
            .bind(nil)
            .bind(KIND)
            .bind(LANE)
            .bind(nil)
            .bind(&ids)
            .bind(&payloads)
            .execute(&mut *conn)
            .await?;
        next += n;
    }
    Ok(t0.elapsed().as_secs_f64().max(1e-9))
}

/// [`DRAIN_SESSIONS`] sessions claiming and completing until a claim finds
/// no row: the wall time, s, and the claims that returned rows.
async fn drain(admin: &PgPool) -> Result<(f64, u64), BenchError> {
    // Every session connected before the clock starts.
    let mut conns = Vec::with_capacity(DRAIN_SESSIONS);
    for _ in 0..DRAIN_SESSIONS {
        conns.push(admin.acquire().await?);
    }
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (s, mut conn) in conns.into_iter().enumerate() {
        tasks.spawn(async move {
            let holder = format!("raw-drain-{s}");
            let mut claims = 0u64;
            loop {
                let ids: Vec<Uuid> = sqlx::query_scalar(CLAIM)
                    .bind(&holder)
                    .bind(LANE)
                    .bind(CLAIM_BATCH as i64)
                    .fetch_all(&mut *conn)
                    .await?;
                if ids.is_empty() {
                    return Ok::<_, BenchError>(claims);
                }
                claims += 1;
                sqlx::query(DONE).bind(&ids).execute(&mut *conn).await?;
            }
        });
    }
    let mut claims = 0;
    while let Some(r) = tasks.join_next().await {
        claims +=
            r.map_err(|e| BenchError::Incomplete(format!("a drain session failed: {e}")))??;
    }
    Ok((t0.elapsed().as_secs_f64().max(1e-9), claims))
}
